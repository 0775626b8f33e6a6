// Node's cluster module as its documentation shows it: the primary forks
// WORKERS (default: one per CPU) copies of app.js and restarts any that exits;
// the primary accepts connections and hands them round-robin to the workers
// (Node's default scheduling policy on Linux).
'use strict';
const cluster = require('node:cluster');
const os = require('node:os');

if (cluster.isPrimary) {
  const workers = Number.parseInt(process.env.WORKERS ?? String(os.availableParallelism()), 10);
  for (let i = 0; i < workers; i++) cluster.fork();
  cluster.on('exit', () => cluster.fork());
} else {
  require('./app.js');
}
