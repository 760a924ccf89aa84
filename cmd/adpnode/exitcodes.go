package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/adpnode/adpnode/adp"
	"github.com/adpnode/adpnode/client"
)

// Exit codes of every command but verify (docs/errors.md).
const (
	exitOK          = 0 // done
	exitFailure     = 1 // any other failure
	exitUsage       = 2 // bad flags or arguments, or input the host refused as invalid
	exitNotFound    = 3 // no such room, request or file
	exitDenied      = 4 // authentication or permission refused
	exitConflict    = 5 // a conflict or a rate limit: retrying later may work
	exitUnavailable = 6 // the node could not be reached or is unavailable
)

// verify's own codes (docs/errors.md): exitVerifyFailed for a file that does
// not verify (also a bad epoch key wrap that --key finds, or an archive not
// proven complete); exitVerifyUnproven when --allow-unproven read an archive
// whose chain verifies but which is not proven complete; exitVerifyKey when
// the key given with --key cannot be used: no such file, no sealing key file
// beside it, a malformed file, another agent's, or a sealing key file others
// can read.
const (
	exitVerifyFailed   = 2
	exitVerifyUnproven = 3
	exitVerifyKey      = 4
)

// errSilent is an error whose message was already printed.
var errSilent = errors.New("")

// exitError carries an exit code with the error to print.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageErrorf is an error in how the command was called (exit 2).
func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// withCode wraps err so that the command exits with code.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// exitCode chooses the exit code for an error a command returned.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ce *client.Error
	if errors.As(err, &ce) {
		switch {
		case ce.Status == 404:
			return exitNotFound
		case ce.Status == 401 || ce.Status == 403:
			return exitDenied
		case ce.Status == 409 || ce.Status == 429:
			return exitConflict
		case ce.Status == 400 || ce.Status == 413 || ce.Status == 422:
			return exitUsage
		case ce.Status >= 500:
			return exitUnavailable
		}
		return exitFailure
	}
	if errors.Is(err, os.ErrNotExist) {
		return exitNotFound
	}
	// Input the client's own checks refused before sending it (a profile
	// name too long, say).
	switch adp.CodeOf(err) {
	case adp.CodeInvalidRequest, adp.CodeInvalidEvent, adp.CodePayloadTooLarge:
		return exitUsage
	}
	if errors.Is(err, client.ErrNodeKey) {
		return exitUsage
	}
	var ne net.Error
	var ue *url.Error
	if errors.As(err, &ne) || errors.As(err, &ue) || errors.Is(err, context.DeadlineExceeded) {
		return exitUnavailable
	}
	if msg := err.Error(); strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") {
		return exitUsage
	}
	return exitFailure
}

// markUsageErrors makes flag and argument errors of cmd and its
// subcommands exit with exitUsage.
func markUsageErrors(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return withCode(exitUsage, err) })
	if args := cmd.Args; args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error { return withCode(exitUsage, args(c, a)) }
	}
	for _, sub := range cmd.Commands() {
		markUsageErrors(sub)
	}
}

// loadAgentKey loads an agent key file, refusing a node's host key, a
// malformed file and a file others may read (exitUsage); a missing file
// is exitNotFound, with the command that makes one.
func loadAgentKey(path string) (*client.Key, error) {
	k, err := client.LoadKey(path)
	if errors.Is(err, client.ErrNodeKey) {
		return nil, withCode(exitUsage, err)
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (make a key with: adpnode keygen --out %s, or pass --key FILE)", err, path)
	}
	if err != nil {
		return nil, withCode(exitUsage, fmt.Errorf("key file: %w (an agent key file is what adpnode keygen writes)", err))
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, usageErrorf("key file %s can be read by others (mode %04o): it holds the agent's private key; chmod 600 %s", path, fi.Mode().Perm(), path)
	}
	return k, nil
}
