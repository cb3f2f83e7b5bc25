// Package tfevent writes and reads TensorBoard event files: TFRecord-framed
// tensorflow.Event protocol buffers carrying scalar summaries, so that
// TensorBoard (or anything reading its files) shows a run's curves.
//
// A record is framed as TFRecord frames it: the payload length as a
// little-endian uint64, the masked CRC-32C of those 8 bytes, the payload,
// and the masked CRC-32C of the payload. The payload is an Event message,
// encoded by hand (no protobuf dependency) with the field numbers of
// TensorFlow's event.proto and summary.proto:
//
//	Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//	Summary { repeated Value value = 1; }
//	Value   { string tag = 1; float simple_value = 2; }
//
// The package knows nothing of training; train decides what to log.
package tfevent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// FileVersion is the file_version of the first event of every file, which
// TensorBoard reads to know the format.
const FileVersion = "brain.Event:2"

// Scalar is one tagged value of a summary.
type Scalar struct {
	Tag   string
	Value float32
}

// Event is one record of an event file: either the file's version record
// (FileVersion set, no scalars) or scalars at a step.
type Event struct {
	WallTime    float64 // seconds since the Unix epoch
	Step        int64
	FileVersion string
	Scalars     []Scalar
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C of data.
func maskedCRC(data []byte) uint32 {
	c := crc32.Checksum(data, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// Protocol buffer wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

func appendTag(b []byte, field, wire int) []byte {
	return binary.AppendUvarint(b, uint64(field<<3|wire))
}

func appendBytes(b []byte, field int, v []byte) []byte {
	b = appendTag(b, field, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// Marshal encodes e as an Event message.
func (e Event) Marshal() []byte {
	var b []byte
	b = appendTag(b, 1, wireFixed64)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e.WallTime))
	if e.Step != 0 {
		b = appendTag(b, 2, wireVarint)
		b = binary.AppendUvarint(b, uint64(e.Step))
	}
	if e.FileVersion != "" {
		b = appendBytes(b, 3, []byte(e.FileVersion))
	}
	if len(e.Scalars) > 0 {
		var sum []byte
		for _, s := range e.Scalars {
			var v []byte
			v = appendBytes(v, 1, []byte(s.Tag))
			v = appendTag(v, 2, wireFixed32)
			v = binary.LittleEndian.AppendUint32(v, math.Float32bits(s.Value))
			sum = appendBytes(sum, 1, v)
		}
		b = appendBytes(b, 5, sum)
	}
	return b
}

// AppendRecord appends payload framed as one TFRecord to b.
func AppendRecord(b, payload []byte) []byte {
	n := len(b)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(payload)))
	b = binary.LittleEndian.AppendUint32(b, maskedCRC(b[n:n+8]))
	b = append(b, payload...)
	return binary.LittleEndian.AppendUint32(b, maskedCRC(payload))
}

// ErrTorn is matched (errors.Is) by the error of Decode when the data end
// inside a record: an append cut short.
var ErrTorn = errors.New("tfevent: last record cut short")

// Decode reads every record of an event file's bytes, checking both CRCs
// of each. It returns the events before any error, and how many bytes
// they take (a torn tail, ErrTorn, starts there).
func Decode(data []byte) (events []Event, n int, err error) {
	for n < len(data) {
		rest := data[n:]
		if len(rest) < 12 {
			return events, n, fmt.Errorf("%w: %d bytes of a 12-byte header at offset %d", ErrTorn, len(rest), n)
		}
		if got, want := binary.LittleEndian.Uint32(rest[8:12]), maskedCRC(rest[:8]); got != want {
			return events, n, fmt.Errorf("tfevent: record at offset %d: length CRC %#08x, want %#08x", n, got, want)
		}
		size := binary.LittleEndian.Uint64(rest[:8])
		if len(rest) < 16 || size > uint64(len(rest)-16) {
			return events, n, fmt.Errorf("%w: record at offset %d of %d bytes, %d left", ErrTorn, n, size, len(rest)-12)
		}
		payload := rest[12 : 12+size]
		if got, want := binary.LittleEndian.Uint32(rest[12+size:]), maskedCRC(payload); got != want {
			return events, n, fmt.Errorf("tfevent: record at offset %d: data CRC %#08x, want %#08x", n, got, want)
		}
		e, err := Unmarshal(payload)
		if err != nil {
			return events, n, fmt.Errorf("tfevent: record at offset %d: %w", n, err)
		}
		events = append(events, e)
		n += 16 + int(size)
	}
	return events, n, nil
}

// Unmarshal decodes an Event message; fields other than those this
// package writes are skipped.
func Unmarshal(b []byte) (Event, error) {
	var e Event
	err := fields(b, func(field, wire int, v uint64, p []byte) error {
		switch {
		case field == 1 && wire == wireFixed64:
			e.WallTime = math.Float64frombits(v)
		case field == 2 && wire == wireVarint:
			e.Step = int64(v)
		case field == 3 && wire == wireBytes:
			e.FileVersion = string(p)
		case field == 5 && wire == wireBytes:
			return fields(p, func(field, wire int, _ uint64, p []byte) error {
				if field != 1 || wire != wireBytes {
					return nil
				}
				var s Scalar
				if err := fields(p, func(field, wire int, v uint64, p []byte) error {
					switch {
					case field == 1 && wire == wireBytes:
						s.Tag = string(p)
					case field == 2 && wire == wireFixed32:
						s.Value = math.Float32frombits(uint32(v))
					}
					return nil
				}); err != nil {
					return err
				}
				e.Scalars = append(e.Scalars, s)
				return nil
			})
		}
		return nil
	})
	return e, err
}

// fields calls f for each field of the message b: the number, the wire
// type, the value of a varint or fixed field, the bytes of a
// length-delimited one.
func fields(b []byte, f func(field, wire int, v uint64, p []byte) error) error {
	for len(b) > 0 {
		key, k := binary.Uvarint(b)
		if k <= 0 {
			return errors.New("bad field key")
		}
		b = b[k:]
		field, wire := int(key>>3), int(key&7)
		var v uint64
		var p []byte
		switch wire {
		case wireVarint:
			var k int
			if v, k = binary.Uvarint(b); k <= 0 {
				return fmt.Errorf("field %d: bad varint", field)
			}
			b = b[k:]
		case wireFixed64:
			if len(b) < 8 {
				return fmt.Errorf("field %d: 8 bytes, %d left", field, len(b))
			}
			v, b = binary.LittleEndian.Uint64(b), b[8:]
		case wireFixed32:
			if len(b) < 4 {
				return fmt.Errorf("field %d: 4 bytes, %d left", field, len(b))
			}
			v, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case wireBytes:
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				return fmt.Errorf("field %d: bad length", field)
			}
			p, b = b[k:k+int(n)], b[k+int(n):]
		default:
			return fmt.Errorf("field %d: unsupported wire type %d", field, wire)
		}
		if err := f(field, wire, v, p); err != nil {
			return err
		}
	}
	return nil
}
