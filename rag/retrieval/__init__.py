"""Finding passages: embeddings, the keyword index (BM25), fusion of the two rankings, optional reranking, and the
retriever that puts them together for a collection."""
