"""The five detection checks: pure functions of (dataset, config, scope) returning a CheckPlan."""
