// PM2 cluster mode: WORKERS instances of app.js (default: one per CPU) behind
// PM2's own use of the cluster module.
module.exports = {
  apps: [{
    name: 'clusterapp-anchor',
    script: __dirname + '/app.js',
    exec_mode: 'cluster',
    instances: Number.parseInt(process.env.WORKERS ?? '0', 10) || 'max',
    env: { PORT: process.env.PORT ?? '3000' },
  }],
};
