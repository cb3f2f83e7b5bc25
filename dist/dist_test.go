package dist

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/hilbert-ml/hilbert/device"
	"github.com/hilbert-ml/hilbert/device/cpu"
)

func TestSingle(t *testing.T) {
	d := cpu.New()
	in := []float32{1.5, -2, 3, 1e-7}
	tests := []struct {
		name    string
		run     func(c Communicator, x, y device.Buffer) error
		want    []float32 // expected y (x for in-place collectives)
		inPlace bool
		errPart string
	}{
		{"sum is identity", func(c Communicator, x, _ device.Buffer) error { return c.AllReduce(x, Sum) }, in, true, ""},
		{"average is identity", func(c Communicator, x, _ device.Buffer) error { return c.AllReduce(x, Average) }, in, true, ""},
		{"broadcast from 0", func(c Communicator, x, _ device.Buffer) error { return c.Broadcast(x, 0) }, in, true, ""},
		{"all-gather copies", func(c Communicator, x, y device.Buffer) error { return c.AllGather(x, y) }, in, false, ""},
		{"barrier", func(c Communicator, _, _ device.Buffer) error { return c.Barrier() }, in, true, ""},
		{"broadcast from 1", func(c Communicator, x, _ device.Buffer) error { return c.Broadcast(x, 1) }, nil, true, "root 1 out of range"},
		{"unknown op", func(c Communicator, x, _ device.Buffer) error { return c.AllReduce(x, Op(7)) }, nil, true, "unknown reduction Op(7)"},
		{"short recv", func(c Communicator, x, y device.Buffer) error { return c.AllGather(x, y.Slice(0, 3)) }, nil, false, "recv has 3 elements, expected 1 ranks x 4 = 4"},
		{"int32 buffer", func(c Communicator, _, _ device.Buffer) error {
			b, _ := d.Alloc(device.Int32, 4)
			return c.AllReduce(b, Sum)
		}, nil, true, "expected float32"},
		{"nil buffer", func(c Communicator, _, _ device.Buffer) error { return c.AllReduce(nil, Sum) }, nil, true, "nil buffer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Single()
			if c.Rank() != 0 || c.Size() != 1 {
				t.Fatalf("rank %d size %d, expected 0 and 1", c.Rank(), c.Size())
			}
			x := cpu.NewFloat32(append([]float32(nil), in...))
			y := cpu.NewFloat32(make([]float32, len(in)))
			err := tt.run(c, x, y)
			if tt.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("error %v, expected one containing %q", err, tt.errPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := cpu.Float32s(y)
			if tt.inPlace {
				got = cpu.Float32s(x)
			}
			for i := range tt.want {
				if got[i] != tt.want[i] {
					t.Fatalf("element %d = %v, expected %v", i, got[i], tt.want[i])
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if err := c.Barrier(); !errors.Is(err, ErrClosed) {
				t.Fatalf("barrier after close: %v, expected ErrClosed", err)
			}
		})
	}
}

func TestLaunchedSize(t *testing.T) {
	tests := []struct {
		name, env, val string
		want           int
		errPart        string
	}{
		{"none", "", "", 0, ""},
		{"openmpi", "OMPI_COMM_WORLD_SIZE", "4", 4, ""},
		{"pmi", "PMI_SIZE", "8", 8, ""},
		{"malformed", "OMPI_COMM_WORLD_SIZE", "two", 0, `OMPI_COMM_WORLD_SIZE="two"`},
		{"zero", "PMI_SIZE", "0", 0, "positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, e := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"} {
				t.Setenv(e, "")
			}
			if tt.env != "" {
				t.Setenv(tt.env, tt.val)
			}
			n, err := LaunchedSize()
			if tt.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errPart) {
					t.Fatalf("error %v, expected one containing %q", err, tt.errPart)
				}
				return
			}
			if err != nil || n != tt.want {
				t.Fatalf("LaunchedSize() = %d, %v; expected %d", n, err, tt.want)
			}
		})
	}
}

func TestAgreeSingle(t *testing.T) {
	if err := Agree(Single(), "model config", []byte("anything")); err != nil {
		t.Fatalf("one rank always agrees with itself: %v", err)
	}
	c := Single()
	c.Close()
	if err := Agree(c, "seed", nil); !errors.Is(err, ErrClosed) || !strings.Contains(err.Error(), "comparing seed") {
		t.Fatalf("Agree on a closed communicator: %v, expected ErrClosed naming the seed", err)
	}
	// A communicator of device buffers only (NCCL's) is sent to AgreeOn.
	if err := Agree(deviceOnly{Single()}, "seed", nil); err == nil || !strings.Contains(err.Error(), "use AgreeOn") {
		t.Fatalf("Agree on a device-only communicator: %v, expected an error naming AgreeOn", err)
	}
	if err := AgreeOn(deviceOnly{Single()}, cpu.New(), "seed", []byte("x")); err != nil {
		t.Fatalf("AgreeOn with one rank: %v", err)
	}
}

// deviceOnly hides a communicator's host gather.
type deviceOnly struct{ Communicator }

func TestLaunchPlain(t *testing.T) {
	for _, e := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"} {
		t.Setenv(e, "")
	}
	c, err := Launch(MPIOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*single); !ok || c.Size() != 1 {
		t.Fatalf("Launch without a launcher returned %T of size %d, expected the single-process communicator", c, c.Size())
	}
	t.Setenv("PMI_SIZE", "-3")
	if _, err := Launch(MPIOptions{}); err == nil || !strings.Contains(err.Error(), `PMI_SIZE="-3"`) {
		t.Fatalf("Launch with PMI_SIZE=-3: error %v, expected one naming the variable", err)
	}
}

// TestDivide checks the average's division against Go's float32 division,
// bit for bit, on normal, subnormal, huge and special values.
func TestDivide(t *testing.T) {
	vals := []float32{0, 1, -3, 7.5, 1e-45, -1.4e-45, 3e-39, 1.17549435e-38, 3.4028235e38, float32(math.Inf(1)), float32(math.NaN())}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		vals = append(vals, math.Float32frombits(rng.Uint32()))
	}
	for _, n := range []int{1, 2, 3, 4, 6, 8, 1024} {
		x := slices.Clone(vals)
		divide(x, n)
		for i, v := range vals {
			want := v / float32(n)
			if math.Float32bits(x[i]) != math.Float32bits(want) && !(want != want && x[i] != x[i]) {
				t.Fatalf("n %d: %v / n = %v (bits %#x), expected %v (bits %#x)", n, v, x[i], math.Float32bits(x[i]), want, math.Float32bits(want))
			}
		}
	}
}

// TestLocalRank checks the variables' order and the errors.
func TestLocalRank(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want int
		err  string
	}{
		{"none", nil, 0, ""},
		{"torchrun", map[string]string{"LOCAL_RANK": "3"}, 3, ""},
		{"openmpi", map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "5"}, 5, ""},
		{"torchrun first", map[string]string{"LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_RANK": "2"}, 1, ""},
		{"mpich", map[string]string{"MPI_LOCALRANKID": "7"}, 7, ""},
		{"slurm", map[string]string{"SLURM_LOCALID": "2"}, 2, ""},
		{"malformed", map[string]string{"LOCAL_RANK": "x"}, 0, `LOCAL_RANK="x"`},
		{"negative", map[string]string{"OMPI_COMM_WORLD_LOCAL_RANK": "-1"}, 0, `OMPI_COMM_WORLD_LOCAL_RANK="-1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range LocalRankEnvs {
				t.Setenv(k, tt.env[k])
			}
			got, err := LocalRank()
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, expected one naming %s", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("LocalRank() = %d, %v; expected %d", got, err, tt.want)
			}
		})
	}
}
