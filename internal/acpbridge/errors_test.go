package acpbridge

import (
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// withReason is an error as agenticd sends it: a code and an ErrorInfo.
func withReason(t *testing.T, code codes.Code, reason string) error {
	t.Helper()
	st, err := status.New(code, "from agenticd").WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: "agenticd"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// Only a turn that had ended is the benign side of the race between session/cancel and a
// withdrawn prompt: another refusal with the same code still gets a warning.
func TestTurnEnded(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"message not running", withReason(t, codes.FailedPrecondition, "MESSAGE_NOT_RUNNING"), true},
		{"session closed", withReason(t, codes.FailedPrecondition, "SESSION_CLOSED"), false},
		{"no details", status.Error(codes.FailedPrecondition, "no turn runs"), false},
		{"not a status", errors.New("MESSAGE_NOT_RUNNING"), false},
		{"success", nil, false},
	} {
		if got := turnEnded(tc.err); got != tc.want {
			t.Errorf("%s: turnEnded = %v, want %v", tc.name, got, tc.want)
		}
	}
}
