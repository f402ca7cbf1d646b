// Starts local-aws-sqs for the Go test harness (internal/testkit/sqstest).
//
// local-aws-sqs ships no command-line entry point, only createSqsServer, so
// this script is that entry point. It listens on 127.0.0.1 with port 0 (the
// kernel picks a free port, so parallel test processes never race for one),
// prints "listening <port>" on stdout for the harness, and exits when its
// stdin closes: the harness holds the other end of that pipe, so the server
// dies with the test process even when no cleanup ran.
"use strict";
const path = require("path");
const dir = process.env.SQSTEST_DIR;
const { createSqsServer } = require(path.join(dir, "node_modules", "local-aws-sqs"));

(async () => {
  const server = await createSqsServer({
    port: 0,
    hostname: "127.0.0.1",
    region: "us-east-1",
    // Tests create and delete queues freely; AWS's 60 s wait before a name
    // can be reused would only slow them down.
    emulateQueueCreationLifecycle: false,
  });
  const { port } = server.address();
  process.stdout.write(`listening ${port}\n`);
  const stop = () => {
    server.close();
    process.exit(0);
  };
  process.stdin.on("end", stop);
  process.stdin.on("error", stop);
  process.stdin.resume();
})().catch((err) => {
  process.stderr.write(`local-aws-sqs failed to start: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
