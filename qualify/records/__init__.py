"""The run folder's records: the documents qualify writes to disk and reads back, one module
each, each with its type, its checks on load and its save.

- `run`: run.json (a run's, a set's or a fleet's record; the set's members; `RunRecord`,
  `update_run`), the plan it was made with (`plan`), its provenance (`provenance`) and its
  rejudgements (`rejudgements`);
- `stage`: a stage's stage.json; `result`: a check's result.json;
- `model`: what the stage and result records share (their base, words and names);
- `migrations`: every record's older versions, and how each is read as the current.

Below the stages and the pipeline, above the checks' contract: a stage, the pipeline and the
report read a record through these types only.
"""
