"""A real Workbench that counts what it is asked and what it reads: candidate queries (`calls`),
searches (`searches`) and candidates' rows read (`rows_read`, through `CollectionReads.documents`)."""

from retrieval.search.workbench import Workbench


class CountingWorkbench(Workbench):
    calls = 0
    rows_read = 0
    searches = 0

    def __init__(self, store):
        super().__init__(store)
        read = self.reads.documents

        def counted(collection, ids, state=None, row_ids=None):
            ids = set(ids)
            self.rows_read += len(ids)
            return read(collection, ids, state, row_ids)

        self.reads.documents = counted

    def candidates(self, collection, query, config):
        self.calls += 1
        return super().candidates(collection, query, config)

    def source_results(self, collection, queries, config, state=None):
        self.calls += len(queries)
        return super().source_results(collection, queries, config, state)

    def search(self, collection, query, config):
        self.searches += 1
        return super().search(collection, query, config)
