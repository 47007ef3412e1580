"""`muninn demo`: a private Synapse, a demo community and Muninn on the embedded defaults."""
