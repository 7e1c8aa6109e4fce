//go:build !linux

package pgtest

import (
	"errors"
	"os"
	"syscall"
)

// runAs returns nil: the server runs as the current user, which must not be
// root (PostgreSQL refuses it; only the Linux build switches users).
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() == 0 {
		return nil, errors.New("pgtest: PostgreSQL refuses to run as root; run the tests as another user")
	}
	return nil, nil
}

func sysProcAttr(*syscall.Credential) *syscall.SysProcAttr { return nil }

func chown(string, *syscall.Credential) error { return nil }

func children(int) ([]int, error) {
	return nil, errors.New("pgtest: freezing a server needs Linux's /proc")
}
