// Persistent requests (alltoallv_init): started, tested and waited for without agreeing or
// planning again; the program was compiled by alltoallv_init.

#include "communicator_impl.hpp"

namespace fast::exec::detail {

// --- persistent requests -------------------------------------------------------------------------

request_impl::~request_impl() {
    if (active && execution) {
        // Tell the peers first: cancelling closes the endpoints of exactly those that wait on
        // this rank, and no abort goes over a closed endpoint.
        comm->mark_failed(status(errc::comm_failed, "a persistent request was destroyed while active"));
        (void)execution->cancel(status(errc::internal, "the request was destroyed while active"));
        comm->set_busy(false);
    }
}

status request_impl::start() {
    if (active) return status(errc::busy, "rank " + std::to_string(comm->rank()) + ": the request is already active");
    if (status s = comm->check_usable("start"); !s.ok()) return s;
    if (comm->scratch_capacity() < compiled.scratch_bytes) {
        // The peers start and wait for this rank: tell them.
        const status failure(errc::internal, "rank " + std::to_string(comm->rank()) +
                                                 ": scratch smaller than the request's plan needs");
        comm->mark_failed(failure);
        return failure;
    }
    const std::uint64_t seq = comm->next_seq();
    comm->set_busy(true);
    active = true;
    if (tracer& t = comm->trace(); t.on()) {
        try {
            const std::size_t k = t.begin_call(seq, true, sendcounts);
            t.call(k).agreed_ns = t.call(k).planned_ns = t.call(k).compiled_ns = t.call(k).start_ns;
            t.call(k).plan_steps = compiled.plan_steps;
        } catch (...) {
            t.open({});
        }
    }
    execution->set_tracer(&comm->trace());
    status s = execution->start(compiled, {send, recv, comm->scratch()}, seq);
    if (!s.ok()) return finish(s);
    return {};
}

status request_impl::finish(status s) {
    active = false;
    comm->set_busy(false);
    if (tracer& t = comm->trace(); t.on()) {
        t.call(t.current()).end_ns = clock_ns();
        t.call(t.current()).ok = s.ok();
    }
    if (execution->broke_communicator()) comm->mark_failed(s);
    ++(s.ok() ? comm->stats().operations : comm->stats().failures);
    return s;
}

status request_impl::test(bool& done) {
    if (!active) {
        done = true;
        return {};
    }
    status s = execution->test(done);
    if (!s.ok() || done) {
        done = true;
        return finish(s);
    }
    return {};
}

status request_impl::wait() {
    if (!active) return {};
    return finish(execution->wait());
}

} // namespace fast::exec::detail
