"""The one evaluator of the language's Programs: semantics, interpreter, unknowns.

- :mod:`.semantics`: a rule group's meaning and errors, stated once (every backend's);
- :mod:`.shapes`: the rule-group forms the lowering emits (the fast paths' and the
  residuals' reading of a group);
- :mod:`.interpreter`: rule-by-rule evaluation with an optional observer (explanations,
  repairs) and unknowns (queries), and a policy's outcome (a Bool, an error, a residual);
- :mod:`.partial` and :mod:`.residual`: unknown values and the residual expressions
  they stand for.

Nothing is imported here: the per-request path takes only what it runs.
"""
