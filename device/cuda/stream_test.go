package cuda

import (
	"errors"
	"strings"
	"testing"
)

// TestOnStream checks that OnStream passes the device's stream, returns f's
// error, and refuses a closed device.
func TestOnStream(t *testing.T) {
	d := newEmuDevice(t)
	var got uintptr
	if err := d.OnStream(func(s uintptr) error { got = s; return nil }); err != nil {
		t.Fatal(err)
	}
	if got == 0 || got != d.Stream() {
		t.Errorf("OnStream passed stream %#x, Stream() is %#x", got, d.Stream())
	}
	boom := errors.New("boom")
	if err := d.OnStream(func(uintptr) error { return boom }); err != boom {
		t.Errorf("OnStream returned %v, expected f's error", err)
	}
	d.Close()
	called := false
	if err := d.OnStream(func(uintptr) error { called = true; return nil }); err == nil || called || !strings.Contains(err.Error(), "closed device") {
		t.Errorf("OnStream on a closed device: error %v, f called %v", err, called)
	}
}
