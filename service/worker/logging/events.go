package logging

import "github.com/sirupsen/logrus"

// WorkerKey is the field naming the worker (its unit instance) on every line
// a worker logs: WORKER= in the journal, so `journalctl WORKER=2`.
const WorkerKey = "worker"

// MessageIDKey is the field whose value becomes the entry's MESSAGE_ID=.
// Set it with Event.
const MessageIDKey = "message_id"

// MESSAGE_ID= values of the lifecycle events, so `journalctl MESSAGE_ID=...`
// selects one kind of event across restarts, workers and releases. Each is a
// random 128-bit id (`systemd-id128 new`) and must never change: operators'
// queries and alerts hold them. systemd/clusterapp.catalog explains each to
// `journalctl -x`.
const (
	// MsgReady: the worker passed its first health probe, sent READY=1 and
	// serves ("serving").
	MsgReady = "8203a250890f4d7286aeafed1849732f"
	// MsgDraining: the worker stopped accepting and finishes the requests
	// it holds ("draining"; the reason field says why: a signal, or the
	// request limit, which MsgRecycled marks too).
	MsgDraining = "87d7b42641a24e89b400f72a579055b8"
	// MsgDrained: the drain ended and the worker exits ("drained; exiting").
	MsgDrained = "06e7b0388ee54898b56e30d4f2b98648"
	// MsgRecycled: the worker reached its request limit
	// (CLUSTERAPP_MAX_REQUESTS) and drains so systemd starts a fresh one.
	MsgRecycled = "fd7c95c2f04a4a169a3d06b853987ab7"
	// MsgRecycledMemory: the worker's resident memory stayed over
	// CLUSTERAPP_MAX_RSS and it drains so systemd starts a fresh one
	// before the memory grows further (service/worker, rss.go).
	MsgRecycledMemory = "2040c603a8e7457eb4051b2c834f87f3"
	// MsgWatchdogProbeFailed: the health probe failed, so the worker
	// withholds WATCHDOG=1 and systemd kills it if it does not recover
	// (package watchdog). Logged once per episode.
	MsgWatchdogProbeFailed = "8f507b3be12f464c898bd4cd99d5e5f4"
	// MsgInvalidConfig: a setting in the environment file is invalid: the
	// worker refuses to start (clusterapp), or the generator falls back to a
	// default or leaves a socket closed (clusterapp-generator).
	MsgInvalidConfig = "25e63ffff04b49a3b43e3cb0d6889422"
	// MsgBackOff: a worker with an invalid configuration waits before it
	// exits, longer at each failure in a row (package crashloop).
	MsgBackOff = "b1a4af2e94c14d608427be08815d7f50"
	// MsgRestartBackOff: a worker that keeps dying soon after it starts
	// waits before it serves, longer at each start in a row (package
	// crashloop).
	MsgRestartBackOff = "c8212ad5a4664e52a5887156001236f9"
	// MsgUnreachedBackOff: a worker unit's process keeps ending before the
	// worker runs (systemd cannot set up its sandbox, the Go runtime cannot
	// start), so `clusterapp-worker exited` waits before systemd restarts it
	// (package crashloop).
	MsgUnreachedBackOff = "e4e21cd3f77a4e188329c1d4543d8f35"
)

// Event returns the fields that mark a line as the lifecycle event id, for
// log.WithFields(logging.Event(logging.MsgReady)).Info("serving").
func Event(id string) logrus.Fields {
	return logrus.Fields{MessageIDKey: id}
}
