"""`python -m pipelines.schemas` rewrites the curated schemas."""

from pipelines.schemas import main

main()
