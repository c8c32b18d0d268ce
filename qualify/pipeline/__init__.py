"""The spine: the plan, the run of its stages in order, the stage runner, re-judging."""
