# A plain PyTorch script; `python train.py --lr 0.05` runs it bare, `ablate run` as a campaign.
import argparse

import torch

import ablate_report as ablate  # stdlib only, installed with ablate: a no-op run bare

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--width", type=int, default=16)
args = parser.parse_args()
torch.manual_seed(ablate.seed())
x = torch.randn(512, 8)
y = (x @ torch.arange(8.0)).sin()
hidden = torch.nn.Linear(8, args.width)
model = torch.nn.Sequential(hidden, torch.nn.Tanh(), torch.nn.Linear(args.width, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
start, steps = ablate.resumed_step(), ablate.steps(300)
until = ablate.until(steps)  # a pilot's last step: it evaluates there, the gate reads it
if start:  # a resumed run: the folder saved at `start`, restored
    state = torch.load(f"{ablate.resume_dir()}/state.pt", weights_only=True)
    model.load_state_dict(state["model"]), optimizer.load_state_dict(state["optimizer"])
for step in range(start + 1, steps + 1):
    loss = torch.nn.functional.mse_loss(model(x[:384]).squeeze(1), y[:384])
    optimizer.zero_grad(), loss.backward(), optimizer.step()
    metrics = {}
    if step % ablate.eval_every(50) == 0 or step == until:
        with torch.no_grad():
            metrics["mse"] = torch.nn.functional.mse_loss(model(x[384:]).squeeze(1), y[384:]).item()
    reply = ablate.report(step, loss.item(), **metrics)
    if reply.checkpoint:  # asked at the tuned interval, at a pilot's end and on SIGTERM
        state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}
        torch.save(state, ablate.checkpoint_dir() / "state.pt")
        ablate.saved(step)
    if reply.stop:
        break
