"""Module files (preprocessing_fn, run_fn, build_student) for each dataset."""
