package child

import (
	"errors"

	"github.com/meshlaunch/meshlaunch/launcher/messages"
)

// setupError classifies a setup failure for the parent (messages.Error.Kind).
type setupError struct {
	kind string
	err  error
}

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

func withKind(kind string, err error) error { return &setupError{kind: kind, err: err} }

func kindOf(err error) string {
	if se, ok := errors.AsType[*setupError](err); ok {
		return se.kind
	}
	return messages.KindOther
}
