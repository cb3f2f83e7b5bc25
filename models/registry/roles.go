package registry

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hilbert-ml/hilbert/tensor"
)

// Role is what a parameter is to an optimizer recipe.
type Role int

const (
	// Matrix is a weight matrix inside the blocks (Muon's).
	Matrix Role = iota + 1
	// Embedding is an input embedding table (token or position).
	Embedding
	// Head is the LM head's weight (untied).
	Head
	// Gain is a normalisation's gain.
	Gain
	// Bias is a bias vector.
	Bias
)

// String names the role as errors and logs do.
func (r Role) String() string {
	switch r {
	case Matrix:
		return "matrix"
	case Embedding:
		return "embedding"
	case Head:
		return "head"
	case Gain:
		return "gain"
	case Bias:
		return "bias"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// Roles gives each parameter of a model, by name, its role.
type Roles struct {
	// Of maps every parameter name to its role.
	Of map[string]Role
	// TiedTo names the embedding the head shares its weight with ("" for
	// an untied head); the model then has no Head parameter.
	TiedTo string
}

// Names returns the parameter names of role r among params, in order.
func (r Roles) Names(params []*tensor.Tensor, role Role) []string {
	var out []string
	for _, p := range params {
		if r.Of[p.Name] == role {
			out = append(out, p.Name)
		}
	}
	return out
}

// Check reports a parameter of params without a role, a role for a name
// that is not a parameter, and an untied model without exactly one head.
func (r Roles) Check(params []*tensor.Tensor) error {
	seen := map[string]bool{}
	heads := 0
	for _, p := range params {
		role, ok := r.Of[p.Name]
		if !ok {
			return fmt.Errorf("registry: parameter %s %v has no role", p.Name, p.Shape())
		}
		seen[p.Name] = true
		if role == Head {
			heads++
		}
	}
	for name, role := range r.Of {
		if !seen[name] {
			return fmt.Errorf("registry: role %s given to %s, which is not a parameter", role, name)
		}
	}
	switch {
	case r.TiedTo == "" && heads != 1:
		return fmt.Errorf("registry: %d head parameters in an untied model, want 1", heads)
	case r.TiedTo != "" && (heads != 0 || r.Of[r.TiedTo] != Embedding):
		return fmt.Errorf("registry: head tied to %s (%s) with %d head parameters; want an embedding and none", r.TiedTo, r.Of[r.TiedTo], heads)
	}
	return nil
}

// RolesByName is the rule the built-in families follow (and a user's family may): the named
// embeddings and head, and inside the blocks (names under blocks)
// matrices for rank 2 and up, biases for rank-1 ".bias", gains for the
// other rank-1 parameters; outside the blocks rank-1 parameters are gains
// and biases in the same way (the final norm), and anything else is an
// error naming it. tied maps an alias to the parameter it shares
// (nn.Tied); a tied head names headName there.
func RolesByName(params []*tensor.Tensor, embeds []string, headName string, tied map[string]string) (Roles, error) {
	r := Roles{Of: map[string]Role{}, TiedTo: tied[headName]}
	for _, p := range params {
		var role Role
		switch {
		case slices.Contains(embeds, p.Name):
			role = Embedding
		case p.Name == headName:
			role = Head
		case p.Rank() == 1 && strings.HasSuffix(p.Name, ".bias"):
			role = Bias
		case p.Rank() == 1:
			role = Gain
		case strings.HasPrefix(p.Name, "blocks.") && p.Rank() >= 2:
			role = Matrix
		default:
			return Roles{}, fmt.Errorf("registry: no role for parameter %s %v", p.Name, p.Shape())
		}
		r.Of[p.Name] = role
	}
	return r, r.Check(params)
}
