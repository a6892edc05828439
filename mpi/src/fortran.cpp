// Fortran entry points. Open MPI 4.1's Fortran bindings call the PMPI_ C functions directly
// (mpi_alltoallv_ in libmpi_mpifh calls PMPI_Alltoallv), so interposing the C functions does not
// reach Fortran programs: these functions take their place, convert the handles and call the C
// functions of this library.
//   - mpif.h and `use mpi`: the program calls mpi_alltoallv_ (gfortran's name; the other
//     manglings Open MPI exports are defined too).
//   - `use mpi_f08`: libmpi_usempif08 calls Open MPI's ompi_alltoallv_f, and for MPI_Test and
//     its forms and MPI_Request_get_status the Fortran PMPI names (pmpi_test_, ...).
// Fortran's MPI_IN_PLACE, MPI_BOTTOM and MPI_STATUS(ES)_IGNORE are addresses of Open MPI's
// common blocks, compared as Open MPI's own bindings compare them.

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h> // Open MPI: the MPIX_ persistent collectives
#endif

#include <vector>

#if defined(OPEN_MPI)

extern "C" {
extern int mpi_fortran_in_place_;
extern int mpi_fortran_bottom_;
extern int mpi_fortran_status_ignore_;
extern int mpi_fortran_statuses_ignore_;
}

namespace {

static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran integers are C ints in this build of MPI");
constexpr int status_size = static_cast<int>(sizeof(MPI_Status) / sizeof(MPI_Fint));

void* buffer(void* b) {
    if (b == &mpi_fortran_in_place_) return MPI_IN_PLACE;
    if (b == &mpi_fortran_bottom_) return MPI_BOTTOM;
    return b;
}

bool ignore_status(const MPI_Fint* s) {
    return static_cast<const void*>(s) == &mpi_fortran_status_ignore_;
}
bool ignore_statuses(const MPI_Fint* s) {
    return static_cast<const void*>(s) == &mpi_fortran_statuses_ignore_;
}

// Requests and statuses of one array call, in C form, written back after the call.
struct request_array {
    MPI_Fint* f;
    std::vector<MPI_Request> c;
    std::vector<MPI_Status> st;
    MPI_Fint* f_statuses;

    request_array(MPI_Fint n, MPI_Fint* requests, MPI_Fint* statuses)
        : f(requests), c(static_cast<std::size_t>(n)), f_statuses(statuses) {
        for (std::size_t i = 0; i < c.size(); ++i) c[i] = PMPI_Request_f2c(f[i]);
        if (statuses != nullptr && !ignore_statuses(statuses)) st.resize(c.size());
    }
    MPI_Status* statuses() { return st.empty() ? MPI_STATUSES_IGNORE : st.data(); }
    // Writes back every request and the first `n_statuses` statuses.
    void write_back(int n_statuses) {
        for (std::size_t i = 0; i < c.size(); ++i) f[i] = PMPI_Request_c2f(c[i]);
        for (int k = 0; !st.empty() && k < n_statuses; ++k)
            PMPI_Status_c2f(&st[static_cast<std::size_t>(k)], f_statuses + k * status_size);
    }
};

void put_status(const MPI_Status& c, MPI_Fint* f) {
    if (!ignore_status(f)) PMPI_Status_c2f(&c, f);
}

// MPI_Waitsome or MPI_Testsome: indices are 1-based in Fortran.
void some(bool wait, MPI_Fint* n, MPI_Fint* reqs, MPI_Fint* outcount, MPI_Fint* indices, MPI_Fint* statuses,
          MPI_Fint* ierr) {
    request_array a(*n, reqs, statuses);
    int out = 0;
    *ierr = wait ? MPI_Waitsome(*n, a.c.data(), &out, indices, a.statuses())
                 : MPI_Testsome(*n, a.c.data(), &out, indices, a.statuses());
    a.write_back(out == MPI_UNDEFINED ? 0 : out);
    *outcount = out;
    for (int k = 0; out != MPI_UNDEFINED && k < out; ++k) indices[k] += 1;
}

void one_request(int (*fn)(MPI_Request*), MPI_Fint* req, MPI_Fint* ierr) {
    MPI_Request r = PMPI_Request_f2c(*req);
    *ierr = fn(&r);
    *req = PMPI_Request_c2f(r);
}

} // namespace

// Defines `impl` and exports it under Fortran's names: lower_, lower__, lower, UPPER, and the
// name the mpi_f08 module calls.
#define FAST_MPI_FORTRAN(impl, lower, upper, f08, params)                                                              \
    extern "C" __attribute__((visibility("default"), alias(#impl))) void lower##_ params;                              \
    extern "C" __attribute__((visibility("default"), alias(#impl))) void lower##__ params;                             \
    extern "C" __attribute__((visibility("default"), alias(#impl))) void lower params;                                 \
    extern "C" __attribute__((visibility("default"), alias(#impl))) void upper params;                                 \
    extern "C" __attribute__((visibility("default"), alias(#impl))) void f08 params;

extern "C" {

#define ALLTOALLV_F                                                                                                    \
    (void* sb, MPI_Fint* sc, MPI_Fint* sd, MPI_Fint* st, void* rb, MPI_Fint* rc, MPI_Fint* rd, MPI_Fint* rt,           \
     MPI_Fint* comm, MPI_Fint* ierr)
void fast_mpi_f_alltoallv ALLTOALLV_F {
    *ierr = MPI_Alltoallv(buffer(sb), sc, sd, PMPI_Type_f2c(*st), buffer(rb), rc, rd, PMPI_Type_f2c(*rt),
                          PMPI_Comm_f2c(*comm));
}
FAST_MPI_FORTRAN(fast_mpi_f_alltoallv, mpi_alltoallv, MPI_ALLTOALLV, ompi_alltoallv_f, ALLTOALLV_F)

#define ALLTOALL_F                                                                                                     \
    (void* sb, MPI_Fint* sc, MPI_Fint* st, void* rb, MPI_Fint* rc, MPI_Fint* rt, MPI_Fint* comm, MPI_Fint* ierr)
void fast_mpi_f_alltoall ALLTOALL_F {
    *ierr =
        MPI_Alltoall(buffer(sb), *sc, PMPI_Type_f2c(*st), buffer(rb), *rc, PMPI_Type_f2c(*rt), PMPI_Comm_f2c(*comm));
}
FAST_MPI_FORTRAN(fast_mpi_f_alltoall, mpi_alltoall, MPI_ALLTOALL, ompi_alltoall_f, ALLTOALL_F)

#define IALLTOALLV_F                                                                                                   \
    (void* sb, MPI_Fint* sc, MPI_Fint* sd, MPI_Fint* st, void* rb, MPI_Fint* rc, MPI_Fint* rd, MPI_Fint* rt,           \
     MPI_Fint* comm, MPI_Fint* req, MPI_Fint* ierr)
void fast_mpi_f_ialltoallv IALLTOALLV_F {
    MPI_Request r = MPI_REQUEST_NULL;
    *ierr = MPI_Ialltoallv(buffer(sb), sc, sd, PMPI_Type_f2c(*st), buffer(rb), rc, rd, PMPI_Type_f2c(*rt),
                           PMPI_Comm_f2c(*comm), &r);
    if (*ierr == MPI_SUCCESS) *req = PMPI_Request_c2f(r);
}
FAST_MPI_FORTRAN(fast_mpi_f_ialltoallv, mpi_ialltoallv, MPI_IALLTOALLV, ompi_ialltoallv_f, IALLTOALLV_F)

#define IALLTOALL_F                                                                                                    \
    (void* sb, MPI_Fint* sc, MPI_Fint* st, void* rb, MPI_Fint* rc, MPI_Fint* rt, MPI_Fint* comm, MPI_Fint* req,        \
     MPI_Fint* ierr)
void fast_mpi_f_ialltoall IALLTOALL_F {
    MPI_Request r = MPI_REQUEST_NULL;
    *ierr = MPI_Ialltoall(buffer(sb), *sc, PMPI_Type_f2c(*st), buffer(rb), *rc, PMPI_Type_f2c(*rt),
                          PMPI_Comm_f2c(*comm), &r);
    if (*ierr == MPI_SUCCESS) *req = PMPI_Request_c2f(r);
}
FAST_MPI_FORTRAN(fast_mpi_f_ialltoall, mpi_ialltoall, MPI_IALLTOALL, ompi_ialltoall_f, IALLTOALL_F)

#if defined(OMPI_HAVE_MPI_EXT_PCOLLREQ)
#define ALLTOALLV_INIT_F                                                                                               \
    (void* sb, MPI_Fint* sc, MPI_Fint* sd, MPI_Fint* st, void* rb, MPI_Fint* rc, MPI_Fint* rd, MPI_Fint* rt,           \
     MPI_Fint* comm, MPI_Fint* info, MPI_Fint* req, MPI_Fint* ierr)
void fast_mpi_f_alltoallv_init ALLTOALLV_INIT_F {
    MPI_Request r = MPI_REQUEST_NULL;
    *ierr = MPIX_Alltoallv_init(buffer(sb), sc, sd, PMPI_Type_f2c(*st), buffer(rb), rc, rd, PMPI_Type_f2c(*rt),
                                PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), &r);
    if (*ierr == MPI_SUCCESS) *req = PMPI_Request_c2f(r);
}
FAST_MPI_FORTRAN(fast_mpi_f_alltoallv_init, mpix_alltoallv_init, MPIX_ALLTOALLV_INIT, ompix_alltoallv_init_f,
                 ALLTOALLV_INIT_F)

#define ALLTOALL_INIT_F                                                                                                \
    (void* sb, MPI_Fint* sc, MPI_Fint* st, void* rb, MPI_Fint* rc, MPI_Fint* rt, MPI_Fint* comm, MPI_Fint* info,       \
     MPI_Fint* req, MPI_Fint* ierr)
void fast_mpi_f_alltoall_init ALLTOALL_INIT_F {
    MPI_Request r = MPI_REQUEST_NULL;
    *ierr = MPIX_Alltoall_init(buffer(sb), *sc, PMPI_Type_f2c(*st), buffer(rb), *rc, PMPI_Type_f2c(*rt),
                               PMPI_Comm_f2c(*comm), PMPI_Info_f2c(*info), &r);
    if (*ierr == MPI_SUCCESS) *req = PMPI_Request_c2f(r);
}
FAST_MPI_FORTRAN(fast_mpi_f_alltoall_init, mpix_alltoall_init, MPIX_ALLTOALL_INIT, ompix_alltoall_init_f,
                 ALLTOALL_INIT_F)
#endif

#define WAIT_F (MPI_Fint * req, MPI_Fint * status, MPI_Fint * ierr)
void fast_mpi_f_wait WAIT_F {
    MPI_Request r = PMPI_Request_f2c(*req);
    MPI_Status s;
    *ierr = MPI_Wait(&r, &s);
    *req = PMPI_Request_c2f(r);
    put_status(s, status);
}
FAST_MPI_FORTRAN(fast_mpi_f_wait, mpi_wait, MPI_WAIT, ompi_wait_f, WAIT_F)

#define TEST_F (MPI_Fint * req, MPI_Fint * flag, MPI_Fint * status, MPI_Fint * ierr)
void fast_mpi_f_test TEST_F {
    MPI_Request r = PMPI_Request_f2c(*req);
    MPI_Status s;
    int f = 0;
    *ierr = MPI_Test(&r, &f, &s);
    *req = PMPI_Request_c2f(r);
    *flag = f ? 1 : 0;
    if (f) put_status(s, status);
}
FAST_MPI_FORTRAN(fast_mpi_f_test, mpi_test, MPI_TEST, pmpi_test_, TEST_F)

#define WAITALL_F (MPI_Fint * n, MPI_Fint * reqs, MPI_Fint * statuses, MPI_Fint * ierr)
void fast_mpi_f_waitall WAITALL_F {
    request_array a(*n, reqs, statuses);
    *ierr = MPI_Waitall(*n, a.c.data(), a.statuses());
    a.write_back(*n);
}
FAST_MPI_FORTRAN(fast_mpi_f_waitall, mpi_waitall, MPI_WAITALL, ompi_waitall_f, WAITALL_F)

#define TESTALL_F (MPI_Fint * n, MPI_Fint * reqs, MPI_Fint * flag, MPI_Fint * statuses, MPI_Fint * ierr)
void fast_mpi_f_testall TESTALL_F {
    request_array a(*n, reqs, statuses);
    int f = 0;
    *ierr = MPI_Testall(*n, a.c.data(), &f, a.statuses());
    *flag = f ? 1 : 0;
    a.write_back(f ? *n : 0);
}
FAST_MPI_FORTRAN(fast_mpi_f_testall, mpi_testall, MPI_TESTALL, pmpi_testall_, TESTALL_F)

#define WAITANY_F (MPI_Fint * n, MPI_Fint * reqs, MPI_Fint * index, MPI_Fint * status, MPI_Fint * ierr)
void fast_mpi_f_waitany WAITANY_F {
    request_array a(*n, reqs, nullptr);
    MPI_Status s;
    int i = MPI_UNDEFINED;
    *ierr = MPI_Waitany(*n, a.c.data(), &i, &s);
    a.write_back(0);
    *index = i == MPI_UNDEFINED ? i : i + 1;
    put_status(s, status);
}
FAST_MPI_FORTRAN(fast_mpi_f_waitany, mpi_waitany, MPI_WAITANY, ompi_waitany_f, WAITANY_F)

#define TESTANY_F (MPI_Fint * n, MPI_Fint * reqs, MPI_Fint * index, MPI_Fint * flag, MPI_Fint * status, MPI_Fint * ierr)
void fast_mpi_f_testany TESTANY_F {
    request_array a(*n, reqs, nullptr);
    MPI_Status s;
    int i = MPI_UNDEFINED, f = 0;
    *ierr = MPI_Testany(*n, a.c.data(), &i, &f, &s);
    a.write_back(0);
    *index = i == MPI_UNDEFINED ? i : i + 1;
    *flag = f ? 1 : 0;
    if (f) put_status(s, status);
}
FAST_MPI_FORTRAN(fast_mpi_f_testany, mpi_testany, MPI_TESTANY, pmpi_testany_, TESTANY_F)

#define SOME_F                                                                                                         \
    (MPI_Fint * n, MPI_Fint * reqs, MPI_Fint * outcount, MPI_Fint * indices, MPI_Fint * statuses, MPI_Fint * ierr)
void fast_mpi_f_waitsome SOME_F {
    some(true, n, reqs, outcount, indices, statuses, ierr);
}
void fast_mpi_f_testsome SOME_F {
    some(false, n, reqs, outcount, indices, statuses, ierr);
}
FAST_MPI_FORTRAN(fast_mpi_f_waitsome, mpi_waitsome, MPI_WAITSOME, ompi_waitsome_f, SOME_F)
FAST_MPI_FORTRAN(fast_mpi_f_testsome, mpi_testsome, MPI_TESTSOME, pmpi_testsome_, SOME_F)

#define GET_STATUS_F (MPI_Fint * req, MPI_Fint * flag, MPI_Fint * status, MPI_Fint * ierr)
void fast_mpi_f_request_get_status GET_STATUS_F {
    MPI_Status s;
    int f = 0;
    *ierr = MPI_Request_get_status(PMPI_Request_f2c(*req), &f, &s);
    *flag = f ? 1 : 0;
    if (*ierr == MPI_SUCCESS && f) put_status(s, status);
}
FAST_MPI_FORTRAN(fast_mpi_f_request_get_status, mpi_request_get_status, MPI_REQUEST_GET_STATUS,
                 pmpi_request_get_status_, GET_STATUS_F)

#define ONE_REQUEST_F (MPI_Fint * req, MPI_Fint * ierr)
void fast_mpi_f_start ONE_REQUEST_F {
    one_request(MPI_Start, req, ierr);
}
void fast_mpi_f_request_free ONE_REQUEST_F {
    one_request(MPI_Request_free, req, ierr);
}
void fast_mpi_f_cancel ONE_REQUEST_F {
    one_request(MPI_Cancel, req, ierr);
}
FAST_MPI_FORTRAN(fast_mpi_f_start, mpi_start, MPI_START, ompi_start_f, ONE_REQUEST_F)
FAST_MPI_FORTRAN(fast_mpi_f_request_free, mpi_request_free, MPI_REQUEST_FREE, ompi_request_free_f, ONE_REQUEST_F)
FAST_MPI_FORTRAN(fast_mpi_f_cancel, mpi_cancel, MPI_CANCEL, ompi_cancel_f, ONE_REQUEST_F)

#define STARTALL_F (MPI_Fint * n, MPI_Fint * reqs, MPI_Fint * ierr)
void fast_mpi_f_startall STARTALL_F {
    request_array a(*n, reqs, nullptr);
    *ierr = MPI_Startall(*n, a.c.data());
    a.write_back(0);
}
FAST_MPI_FORTRAN(fast_mpi_f_startall, mpi_startall, MPI_STARTALL, ompi_startall_f, STARTALL_F)

#define INIT_F (MPI_Fint * ierr)
void fast_mpi_f_init INIT_F {
    *ierr = MPI_Init(nullptr, nullptr);
}
FAST_MPI_FORTRAN(fast_mpi_f_init, mpi_init, MPI_INIT, ompi_init_f, INIT_F)

#define INIT_THREAD_F (MPI_Fint * required, MPI_Fint * provided, MPI_Fint * ierr)
void fast_mpi_f_init_thread INIT_THREAD_F {
    int p = 0;
    *ierr = MPI_Init_thread(nullptr, nullptr, *required, &p);
    *provided = p;
}
FAST_MPI_FORTRAN(fast_mpi_f_init_thread, mpi_init_thread, MPI_INIT_THREAD, ompi_init_thread_f, INIT_THREAD_F)

#define FINALIZE_F (MPI_Fint * ierr)
void fast_mpi_f_finalize FINALIZE_F {
    *ierr = MPI_Finalize();
}
FAST_MPI_FORTRAN(fast_mpi_f_finalize, mpi_finalize, MPI_FINALIZE, ompi_finalize_f, FINALIZE_F)

} // extern "C"

#endif // OPEN_MPI
