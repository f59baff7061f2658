"""The processors behind the DSL operators, one module per family of operators."""
