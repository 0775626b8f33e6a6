package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
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

// interruptible returns ctx canceled at the first SIGINT (Ctrl-C) or
// SIGTERM (systemd ending `systemctl reload clusterapp`, a kill), with
// "interrupted by SIGINT" as its cause, and says so on stdout. A command
// changing the pool then starts no further job but waits for the one in
// progress, which systemd carries out anyway: the command can then say
// where it stopped, and every worker it touched serves again. A second
// signal ends the process at once, leaving that job to systemd. stop
// releases the signals.
func interruptible(ctx context.Context, stdout io.Writer) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			// From here on the signals kill the process again: a second
			// Ctrl-C is how an operator gives up waiting.
			signal.Stop(sigs)
			name := "SIGTERM"
			if sig == os.Interrupt {
				name = "SIGINT"
			}
			fmt.Fprintf(stdout, "interrupted by %s: finishing the job in progress, starting no other (%s again to leave it to systemd)\n", name, name)
			cancel(fmt.Errorf("interrupted by %s", name))
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// beginPoolChange is how a command that changes the pool (reload, scale)
// begins: it dials systemd, then arms the interruption (the connection
// closes when the context it was dialed with ends, and the job in progress
// must still be waited for after a Ctrl-C), then takes the pool lock, so
// that what it plans from the pool as it is now is not changed meanwhile
// by another such command. end undoes the three, in the reverse order.
func beginPoolChange(ctx context.Context, cmd string, stdout io.Writer) (_ context.Context, _ *units.Client, end func(), _ error) {
	c, err := dialUnits(ctx, cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, stop := interruptible(ctx, stdout)
	lock, err := lockPool(ctx, cmd, stdout)
	if err != nil {
		stop()
		c.Close()
		return nil, nil, nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return ctx, c, func() { lock.Release(); stop(); c.Close() }, nil
}

// lockPool takes the lock of the commands that change the pool, for cmd
// ("reload"), waiting for another such command to finish and saying so.
func lockPool(ctx context.Context, cmd string, stdout io.Writer) (*oplock.Lock, error) {
	l, err := oplock.Acquire(ctx, oplock.Path, "clusterapp "+cmd, func(holder string) {
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

// jobContext bounds one systemd job the command waits for by timeout, and
// not by an interruption: see interruptible.
func jobContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), timeout)
}

// queryContext bounds a D-Bus query by opTimeout, and not by an
// interruption: the query says how things stand after one.
func queryContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), opTimeout)
}
