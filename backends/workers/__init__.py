"""Workers: other machines (or this one's other devices) that hold a model's layers through llama.cpp's RPC.
Pairing and the encrypted link, the RPC server a worker runs, the engine's links to it, and the pipelined plan
with its cost on the network."""
