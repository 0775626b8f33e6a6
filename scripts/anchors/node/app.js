// The seed application as the Node.js world writes it (Express): `/`, `/fib?n=`
// (recursive Fibonacci) and `/slow` (100,000 random numbers, sum of squares),
// with the same bodies as clusterapp and cmd/clusterapp-bare. `make bench` runs
// it under Node's cluster module (cluster.js) and under PM2's cluster mode
// (ecosystem.config.js) as the anchors the suite replaces. PORT sets the port.
'use strict';
const express = require('express');

function fib(n) {
  return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

const app = express();
app.disable('x-powered-by');
app.disable('etag');
app.get('/', (req, res) => {
  res.type('text/plain').send('Hello World!\n');
});
app.get('/fib', (req, res) => {
  const n = Number.parseInt(req.query.n ?? '40', 10);
  if (!Number.isInteger(n) || n < 0 || n > 45) {
    res.status(400).json({ error: 'n must be a whole number from 0 to 45', status: 400 });
    return;
  }
  res.type('application/json').send(`{"fib":${fib(n)},"n":${n}}\n`);
});
app.get('/slow', (req, res) => {
  let sum = 0;
  for (let i = 0; i < 100000; i++) {
    const v = Math.random();
    sum += v * v;
  }
  res.type('application/json').send(`{"sum":${sum}}\n`);
});
app.get('/healthz', (req, res) => {
  res.type('application/json').send('{"status":"ok"}\n');
});

const port = Number.parseInt(process.env.PORT ?? '3000', 10);
app.listen(port, '127.0.0.1');
