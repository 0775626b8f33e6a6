// Package server runs the worker's http.Server on inherited or self-bound
// listeners and drains it without losing a request.
//
// Plain http.Server.Shutdown loses requests when a worker restarts under
// keep-alive load: it closes connections it sees as idle, racing a client
// that is sending its next request on them, and net/http drops requests read
// after Shutdown begins (golang/go#65802).
// Drain instead:
//
//  1. marks the worker draining: /readyz answers 503 and every response from
//     now on carries "Connection: close" (decided when its header is written,
//     so requests already in flight get it too);
//  2. closes its own copy of each listening socket, never systemd's: the
//     socket stays open and new connections wait in the shared backlog for
//     the other workers or the next instance;
//  3. waits for the connections to finish: a client's next request is
//     answered with Connection: close and the connection ends cleanly; a
//     connection that stays idle for DrainIdleGrace after the drain began is
//     closed (a client silent that long is not about to send);
//  4. after ShutdownTimeout, or when no connection is left, calls Shutdown
//     and then Close for anything remaining.
//
// The same drain ends a worker recycled after MaxRequests (gunicorn's
// max_requests): it exits 0 and systemd's Restart= starts a fresh process.
//
// At its open-file limit the server keeps serving the connections it holds:
// each listener is wrapped by package fdlimit, so accepts wait (the
// connections stay in the shared backlog, for the other workers) instead of
// failing, and resume as soon as one of the server's connections closes.
package server
