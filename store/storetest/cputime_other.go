//go:build !unix

package storetest

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
