package main

import (
	"context"
	"fmt"
	"time"

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
