// A stand-in for libnccl.so.2, built by the tests with gcc. It implements
// the NCCL calls dist/nccl binds for ranks that are threads of one process:
// ncclCommInitRank joins the ranks that present the same ncclUniqueId
// (passed by value, as in NCCL), and the collectives meet at a barrier,
// read every rank's host buffer and write the result, so reductions are
// really performed. It records the arguments of each rank's last call, for
// the tests to read back through the stub_* functions.
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t;
enum { ncclSuccess = 0, ncclInvalidArgument = 4, ncclInvalidUsage = 5 };
enum { ncclFloat32 = 7 };
enum { ncclSum = 0, ncclAvg = 4 };

#define MAXR 16

typedef struct clique {
	ncclUniqueId id;
	int nranks, joined, waiting, phase;
	const void *send[MAXR];
	void *recv[MAXR];
	pthread_mutex_t mu;
	pthread_cond_t cv;
} clique;

typedef struct comm {
	clique *c;
	int rank;
} *ncclComm_t;

static pthread_mutex_t gmu = PTHREAD_MUTEX_INITIALIZER;
static clique *cliques[64];
static int ncliques, idCounter;

// Last arguments, per rank.
static struct {
	unsigned char id[128];
	int nranks, rank, dtype, op, root;
	size_t count;
	uintptr_t stream;
	const void *send;
	void *recv;
	char last[32];
} rec[MAXR];

static void barrier(clique *c) {
	pthread_mutex_lock(&c->mu);
	int phase = c->phase;
	if (++c->waiting == c->nranks) {
		c->waiting = 0;
		c->phase++;
		pthread_cond_broadcast(&c->cv);
	} else {
		while (phase == c->phase) pthread_cond_wait(&c->cv, &c->mu);
	}
	pthread_mutex_unlock(&c->mu);
}

ncclResult_t ncclGetVersion(int *v) { *v = 22105; return ncclSuccess; }

const char *ncclGetErrorString(ncclResult_t r) {
	switch (r) {
	case ncclInvalidArgument: return "invalid argument (stub)";
	case ncclInvalidUsage: return "invalid usage (stub)";
	}
	return "unknown result (stub)";
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
	pthread_mutex_lock(&gmu);
	int k = ++idCounter;
	pthread_mutex_unlock(&gmu);
	// Distinct in every call and every process, like NCCL's (which holds the
	// root's address): the pid is in bytes 0-3, the call count in 4-7.
	int pid = (int)getpid();
	for (int i = 0; i < 128; i++) id->internal[i] = (char)(i * 7 + k * 13 + 1);
	memcpy(id->internal, &pid, 4);
	memcpy(id->internal + 4, &k, 4);
	return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
	if (nranks < 1 || nranks > MAXR || rank < 0 || rank >= nranks) return ncclInvalidArgument;
	memcpy(rec[rank].id, id.internal, 128);
	rec[rank].nranks = nranks;
	rec[rank].rank = rank;
	strcpy(rec[rank].last, "init");
	pthread_mutex_lock(&gmu);
	clique *c = NULL;
	for (int i = 0; i < ncliques; i++)
		if (memcmp(cliques[i]->id.internal, id.internal, 128) == 0) c = cliques[i];
	if (c == NULL) {
		c = calloc(1, sizeof *c);
		c->id = id;
		c->nranks = nranks;
		pthread_mutex_init(&c->mu, NULL);
		pthread_cond_init(&c->cv, NULL);
		cliques[ncliques++] = c;
	}
	pthread_mutex_unlock(&gmu);
	if (c->nranks != nranks) return ncclInvalidUsage;
	struct comm *cm = calloc(1, sizeof *cm);
	cm->c = c;
	cm->rank = rank;
	barrier(c); // NCCL's init blocks until every rank has joined
	*comm = cm;
	return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
	strcpy(rec[comm->rank].last, "destroy");
	free(comm);
	return ncclSuccess;
}

static void record(ncclComm_t comm, const char *what, const void *send, void *recv, size_t count, int dtype, int op, int root, uintptr_t stream) {
	int r = comm->rank;
	strcpy(rec[r].last, what);
	rec[r].send = send;
	rec[r].recv = recv;
	rec[r].count = count;
	rec[r].dtype = dtype;
	rec[r].op = op;
	rec[r].root = root;
	rec[r].stream = stream;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, int dtype, int op, ncclComm_t comm, uintptr_t stream) {
	record(comm, "allreduce", send, recv, count, dtype, op, -1, stream);
	if (dtype != ncclFloat32 || (op != ncclSum && op != ncclAvg)) return ncclInvalidArgument;
	clique *c = comm->c;
	c->send[comm->rank] = send;
	barrier(c);
	float *tmp = malloc(count * sizeof(float) + 1);
	for (size_t i = 0; i < count; i++) {
		double s = 0;
		for (int q = 0; q < c->nranks; q++) s += ((const float *)c->send[q])[i];
		tmp[i] = (float)(op == ncclAvg ? s / c->nranks : s);
	}
	barrier(c); // every rank has read every send buffer (recv may alias send)
	memcpy(recv, tmp, count * sizeof(float));
	free(tmp);
	barrier(c);
	return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, int dtype, int root, ncclComm_t comm, uintptr_t stream) {
	record(comm, "broadcast", send, recv, count, dtype, -1, root, stream);
	clique *c = comm->c;
	if (dtype != ncclFloat32 || root < 0 || root >= c->nranks) return ncclInvalidArgument;
	c->send[comm->rank] = send;
	barrier(c);
	if (comm->rank != root) memcpy(recv, c->send[root], count * sizeof(float));
	else if (recv != send) memmove(recv, send, count * sizeof(float));
	barrier(c);
	return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, int dtype, ncclComm_t comm, uintptr_t stream) {
	record(comm, "allgather", send, recv, count, dtype, -1, -1, stream);
	if (dtype != ncclFloat32) return ncclInvalidArgument;
	clique *c = comm->c;
	c->send[comm->rank] = send;
	barrier(c);
	for (int q = 0; q < c->nranks; q++) memcpy((float *)recv + (size_t)q * count, c->send[q], count * sizeof(float));
	barrier(c);
	return ncclSuccess;
}

// Read-back of the recorded arguments.
void stub_id(int rank, unsigned char *out) { memcpy(out, rec[rank].id, 128); }
int stub_nranks(int rank) { return rec[rank].nranks; }
size_t stub_count(int rank) { return rec[rank].count; }
int stub_dtype(int rank) { return rec[rank].dtype; }
int stub_op(int rank) { return rec[rank].op; }
int stub_root(int rank) { return rec[rank].root; }
uintptr_t stub_stream(int rank) { return rec[rank].stream; }
uintptr_t stub_send(int rank) { return (uintptr_t)rec[rank].send; }
uintptr_t stub_recv(int rank) { return (uintptr_t)rec[rank].recv; }
const char *stub_last(int rank) { return rec[rank].last; }
