"""`qualify remedy`: the compile stage's failing source files rebuilt with variants of the
candidate's code generation, each compared kernel by kernel with both arms (docs/remedy.md)."""
