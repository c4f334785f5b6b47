// diverging_script.py in JavaScript: JSON.stringify writes a NaN or infinite loss as null.
// Its "loss" grows by --lr per step; it asks for an answer at every step and obeys it.
const fs = require("fs");

const lr = Number(process.argv[process.argv.indexOf("--lr") + 1]);
const steps = Number(process.env.ABLATE_STEPS);
const every = Number(process.env.ABLATE_EVAL_EVERY);

function readLine() {
  // One line from stdin, synchronously (fd 0 is a blocking pipe: process.stdin is never opened).
  const byte = Buffer.alloc(1);
  let line = "";
  for (;;) {
    let n;
    try {
      n = fs.readSync(0, byte, 0, 1, null);
    } catch (error) {
      if (error.code === "EAGAIN") continue;
      throw error;
    }
    if (n === 0 || byte[0] === 10) return line;
    line += String.fromCharCode(byte[0]);
  }
}

let loss = 1.0;
for (let step = 1; step <= steps; step++) {
  loss *= lr;
  const message = { step: step, loss: loss, reply: true };
  if (step % every === 0 || step === steps) message.metrics = { mse: 0.1 };
  fs.writeSync(1, JSON.stringify(message) + "\n");
  if (JSON.parse(readLine()).stop) break;
}
