package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/clusterapp/clusterapp/service/ops/oplock"
	"github.com/clusterapp/clusterapp/service/ops/units"
)

// opTimeout bounds an operator command's D-Bus queries (not its jobs).
const opTimeout = 10 * time.Second

// dialUnits connects to systemd for an operator command and checks that
// clusterapp's units are installed. The errors are the one-liners of
// units.ErrNotRoot, ErrNoSystemd and ErrNotInstalled.
func dialUnits(ctx context.Context, cmd string) (*units.Client, error) {
	return dialWith(ctx, cmd, units.Dial)
}

// dialUnitsRead is dialUnits for commands that only read (status): without
// root it reads over the D-Bus system bus.
func dialUnitsRead(ctx context.Context, cmd string) (*units.Client, error) {
	return dialWith(ctx, cmd, units.DialRead)
}

func dialWith(ctx context.Context, cmd string, dial func(context.Context) (*units.Client, error)) (*units.Client, error) {
	c, err := dial(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	qctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	if err := c.RequireInstalled(qctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return c, nil
}

// poolLockPath is oplock.Path; tests point it elsewhere.
var poolLockPath = oplock.Path

// lockPool takes the lock of the commands that change the pool, for cmd
// ("reload"), waiting for another such command to finish and saying so.
func lockPool(ctx context.Context, cmd string, stdout io.Writer) (*oplock.Lock, error) {
	l, err := oplock.Acquire(ctx, poolLockPath, "clusterapp "+cmd, func(holder string) {
		if holder == "" {
			holder = "another clusterapp command"
		}
		fmt.Fprintf(stdout, "%s is changing the pool: waiting for it to finish\n", holder)
	})
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%w while waiting for the other command; nothing was changed", err)
	}
	return l, err
}
