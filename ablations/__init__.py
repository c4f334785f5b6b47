"""ablate: ablation campaigns that end in a decision. The domain layer; runs without Prefect."""

__version__ = "0.1.0"
