"""`ingest.search.ranking`: how the read path orders and judges its candidates.

Pure scoring over texts and numbers, no I/O: reciprocal rank fusion of the first stage's lists
(`fusion`), the second stage's features and learned ranker (`rank`), the close/not-close
judgment and what hostile or made-up input cannot make of it (`judgment`, rule 22c), and the
trained coefficients and floors, one model an embedder (`models`). `ingest.search.second`
applies them to the fused candidates; nothing here imports the rest of the read path.
"""
