package device

import (
	"reflect"
	"testing"
)

// named is a Core that only has a name (Describe reads nothing else).
type named struct {
	Core
	name string
}

func (n named) Name() string { return n.name }

type described struct{ named }

func (described) Description() Description {
	return Description{Kind: "x", Settings: []Setting{{"k", "v"}}}
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		dev  Core
		want Description
	}{
		{named{name: "cuda:3"}, Description{Kind: "cuda"}},
		{named{name: "cpu"}, Description{Kind: "cpu"}},
		{described{named{name: "cuda:0"}}, Description{Kind: "x", Settings: []Setting{{"k", "v"}}}},
	} {
		if got := Describe(c.dev); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Describe(%s) = %+v, want %+v", c.dev.Name(), got, c.want)
		}
	}
}
