package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"syscall"
	"testing"

	"github.com/schedulerd/schedulerd/delivery"
	"github.com/schedulerd/schedulerd/delivery/httpdelivery"
	"github.com/schedulerd/schedulerd/model"
)

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestReasonOf(t *testing.T) {
	refused := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp",
		Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	for _, tc := range []struct {
		name string
		tt   model.TargetType
		r    delivery.Result
		want delivery.Reason
	}{
		{"success", model.TargetHTTP, delivery.Result{StatusCode: 200}, ""},
		{"refused", model.TargetHTTP, delivery.Result{Err: refused}, delivery.ReasonRefused},
		{"ssrf", model.TargetHTTP, delivery.Result{Err: fmt.Errorf("event e: %w", fmt.Errorf("%w: 169.254.169.254", httpdelivery.ErrTargetRefused)), Permanent: true}, delivery.ReasonSSRF},
		{"deadline", model.TargetHTTP, delivery.Result{Err: fmt.Errorf("post: %w", context.DeadlineExceeded)}, delivery.ReasonTimeout},
		{"net timeout", model.TargetHTTP, delivery.Result{Err: &url.Error{Op: "Post", URL: "http://x", Err: timeoutErr{}}}, delivery.ReasonTimeout},
		{"404", model.TargetHTTP, delivery.Result{Err: errors.New("status 404"), StatusCode: 404}, delivery.ReasonHTTP4xx},
		{"429", model.TargetHTTP, delivery.Result{Err: errors.New("status 429"), StatusCode: 429}, delivery.ReasonHTTP4xx},
		{"503", model.TargetHTTP, delivery.Result{Err: errors.New("status 503"), StatusCode: 503}, delivery.ReasonHTTP5xx},
		{"sqs credentials", model.TargetSQS, delivery.Result{Err: errors.New("no EC2 IMDS role found")}, delivery.ReasonSQS},
		{"sqs timeout", model.TargetSQS, delivery.Result{Err: context.DeadlineExceeded}, delivery.ReasonSQS},
		{"dns", model.TargetHTTP, delivery.Result{Err: &net.DNSError{Err: "no such host", Name: "x"}}, delivery.ReasonOther},
	} {
		if got := delivery.ReasonOf(tc.tt, tc.r); got != tc.want {
			t.Errorf("%s: ReasonOf = %q, want %q", tc.name, got, tc.want)
		}
	}
}
