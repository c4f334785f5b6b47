"""What the campaign refuses or hides: secrets, foreign objects, foreign code, runaway plans.

credentials.py  one redaction for every message; a scan of the output folder for secrets
signing.py      signed store objects (ABLATE_SIGNING_KEY): work-pool results, commit records
entries.py      the workload modules a served campaign may import (the allow-list)
limits.py       the caps on runs and steps, owned by the process, never the plan
"""
