! An ordinary Fortran MPI program, written without any knowledge of fast: MPI_Alltoallv,
! MPI_Alltoall, their nonblocking and persistent forms and MPI_IN_PLACE, every received element
! checked and every rank's receive buffers written to OUTDIR/<case>.<rank> for a byte-for-byte
! comparison of runs with and without libfast_mpi. Built with `use mpi` (mpif.h's bindings) or,
! with -DF08, `use mpi_f08`.
!   alltoall_cases_f OUTDIR
program alltoall_cases_f
#ifdef F08
  use mpi_f08
  use mpi_f08_ext
#define HANDLE_COMM type(MPI_Comm)
#define HANDLE_REQUEST type(MPI_Request)
#else
  use mpi
  use mpi_ext
#define HANDLE_COMM integer
#define HANDLE_REQUEST integer
#endif
  implicit none
  integer :: rank, nranks, ierr, failures, total, nargs
  character(len=4096) :: outdir

  nargs = command_argument_count()
  if (nargs < 1) then
    print '(a)', 'usage: alltoall_cases_f OUTDIR'
    stop 2
  end if
  call get_command_argument(1, outdir)
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks, ierr)
  failures = 0
  call case_v_int(1)
  call case_a_double(2)
  call case_nonblocking(3)
  call case_inplace(4)
  call case_persistent(5)
  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total == 0) then
      print '(a,i0,a)', 'alltoall_cases_f: every check passed on ', nranks, ' ranks'
    else
      print '(a,i0,a)', 'alltoall_cases_f: FAILED on ', nranks, ' ranks'
    end if
  end if
  call MPI_Finalize(ierr)
  if (total /= 0) stop 1

contains

  ! Element k of the block rank i sends rank j in case c.
  integer function val(c, i, j, k)
    integer, intent(in) :: c, i, j, k
    integer(8) :: x
    x = int(c, 8) * 1000003_8 + int(i, 8) * 7919_8 + int(j, 8) * 104729_8 + int(k, 8) * 31_8
    val = int(mod(x * 2654435761_8, 2147483647_8))
  end function

  ! Skewed counts: a hot destination per sender.
  integer function cnt(c, i, j)
    integer, intent(in) :: c, i, j
    cnt = mod(i * 37 + j * 101 + c * 13, 50) * 200
    if (mod(i + c, nranks) == j) cnt = cnt + 30000
  end function

  subroutine fail(what, a)
    character(len=*), intent(in) :: what
    integer, intent(in) :: a
    failures = failures + 1
    print '(a,i0,a,a,a,i0)', '[rank ', rank, '] FAIL: ', what, ' ', a
  end subroutine

  subroutine dump(name, buf, n)
    character(len=*), intent(in) :: name
    integer, intent(in) :: n
    integer, intent(in) :: buf(n)
    character(len=4200) :: path
    integer :: u
    write (path, '(a,a,a,a,i0)') trim(outdir), '/', name, '.', rank
    open (newunit=u, file=path, access='stream', form='unformatted', status='replace')
    write (u) buf
    close (u)
  end subroutine

  ! Counts and displacements (blocks in reverse rank order, a gap after each) of one side.
  subroutine layout(c, sending, counts, displs, length)
    integer, intent(in) :: c
    logical, intent(in) :: sending
    integer, intent(out) :: counts(0:nranks - 1), displs(0:nranks - 1), length
    integer :: j
    length = 0
    do j = nranks - 1, 0, -1
      if (sending) then
        counts(j) = cnt(c, rank, j)
      else
        counts(j) = cnt(c, j, rank)
      end if
      displs(j) = length
      length = length + counts(j) + 1
    end do
  end subroutine

  subroutine fill(c, s, sc, sd)
    integer, intent(in) :: c, sc(0:), sd(0:)
    integer, intent(inout) :: s(:)
    integer :: j, k
    do j = 0, nranks - 1
      do k = 1, sc(j)
        s(sd(j) + k) = val(c, rank, j, k)
      end do
    end do
  end subroutine

  subroutine check(c, r, rc, rd, name)
    integer, intent(in) :: c, r(:), rc(0:), rd(0:)
    character(len=*), intent(in) :: name
    integer :: i, k
    do i = 0, nranks - 1
      do k = 1, rc(i)
        if (r(rd(i) + k) /= val(c, i, rank, k)) then
          call fail(name, i)
          return
        end if
      end do
    end do
    call dump(name, r, size(r))
  end subroutine

  subroutine case_v_int(c)
    integer, intent(in) :: c
    integer :: sc(0:nranks - 1), sd(0:nranks - 1), rc(0:nranks - 1), rd(0:nranks - 1), slen, rlen
    integer, allocatable :: s(:), r(:)
    call layout(c, .true., sc, sd, slen)
    call layout(c, .false., rc, rd, rlen)
    allocate (s(slen), r(rlen))
    s = 0
    r = -1
    call fill(c, s, sc, sd)
    call MPI_Alltoallv(s, sc, sd, MPI_INTEGER, r, rc, rd, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    call check(c, r, rc, rd, 'f_v_int')
  end subroutine

  subroutine case_a_double(c)
    integer, intent(in) :: c
    integer, parameter :: n = 5000
    double precision, allocatable :: s(:), r(:)
    integer :: i, k
    allocate (s(n * nranks), r(n * nranks))
    do i = 0, nranks - 1
      do k = 1, n
        s(i * n + k) = val(c, rank, i, k) / 3.0d0
      end do
    end do
    r = 0
    call MPI_Alltoall(s, n, MPI_DOUBLE_PRECISION, r, n, MPI_DOUBLE_PRECISION, MPI_COMM_WORLD, ierr)
    do i = 0, nranks - 1
      do k = 1, n
        if (r(i * n + k) /= val(c, i, rank, k) / 3.0d0) then
          call fail('f_a_double', i)
          exit
        end if
      end do
    end do
    call dump('f_a_double', transfer(r, [0]), 2 * n * nranks)
  end subroutine

  ! MPI_Ialltoallv beside a ring exchange, completed by MPI_Waitall; MPI_Ialltoall by MPI_Test.
  subroutine case_nonblocking(c)
    integer, intent(in) :: c
    integer, parameter :: ring = 100000, n = 6000
    integer :: sc(0:nranks - 1), sd(0:nranks - 1), rc(0:nranks - 1), rd(0:nranks - 1), slen, rlen, k
    integer, allocatable :: s(:), r(:), out(:), in(:), sa(:), ra(:)
    HANDLE_REQUEST :: q(3), qa
    logical :: flag
    call layout(c, .true., sc, sd, slen)
    call layout(c, .false., rc, rd, rlen)
    allocate (s(slen), r(rlen), out(ring), in(ring), sa(n * nranks), ra(n * nranks))
    s = 0
    r = -1
    call fill(c, s, sc, sd)
    out = [(val(c, rank, 0, k), k = 1, ring)]
    call MPI_Ialltoallv(s, sc, sd, MPI_INTEGER, r, rc, rd, MPI_INTEGER, MPI_COMM_WORLD, q(1), ierr)
    call MPI_Irecv(in, ring, MPI_INTEGER, mod(rank + nranks - 1, nranks), 9, MPI_COMM_WORLD, q(2), ierr)
    call MPI_Isend(out, ring, MPI_INTEGER, mod(rank + 1, nranks), 9, MPI_COMM_WORLD, q(3), ierr)
    call MPI_Waitall(3, q, MPI_STATUSES_IGNORE, ierr)
    call check(c, r, rc, rd, 'f_nb_v')
    if (any(in /= [(val(c, mod(rank + nranks - 1, nranks), 0, k), k = 1, ring)])) call fail('f_nb_ring', 0)
    do k = 1, n * nranks
      sa(k) = val(c + 1, rank, (k - 1) / n, mod(k - 1, n))
    end do
    call MPI_Ialltoall(sa, n, MPI_INTEGER, ra, n, MPI_INTEGER, MPI_COMM_WORLD, qa, ierr)
    flag = .false.
    do while (.not. flag)
      call MPI_Test(qa, flag, MPI_STATUS_IGNORE, ierr)
    end do
    do k = 1, n * nranks
      if (ra(k) /= val(c + 1, (k - 1) / n, rank, mod(k - 1, n))) then
        call fail('f_nb_a', k)
        exit
      end if
    end do
    call dump('f_nb_a', ra, n * nranks)
  end subroutine

  subroutine case_inplace(c)
    integer, intent(in) :: c
    integer :: rc(0:nranks - 1), rd(0:nranks - 1), j, k, length
    integer, allocatable :: r(:)
    HANDLE_COMM :: comm
    length = 0
    do j = 0, nranks - 1
      rc(j) = cnt(c, min(rank, j), max(rank, j)) ! symmetric: in place, each pair swaps equal blocks
      rd(j) = length
      length = length + rc(j)
    end do
    allocate (r(length))
    do j = 0, nranks - 1
      do k = 1, rc(j)
        r(rd(j) + k) = val(c, rank, j, k)
      end do
    end do
    comm = MPI_COMM_WORLD
    call MPI_Alltoallv(MPI_IN_PLACE, rc, rd, MPI_INTEGER, r, rc, rd, MPI_INTEGER, comm, ierr)
    call check(c, r, rc, rd, 'f_inplace')
  end subroutine

  subroutine case_persistent(c)
    integer, intent(in) :: c
    integer :: sc(0:nranks - 1), sd(0:nranks - 1), rc(0:nranks - 1), rd(0:nranks - 1), slen, rlen, round
    integer, allocatable :: s(:), r(:)
    character(len=32) :: name
    HANDLE_REQUEST :: q
    call layout(c, .true., sc, sd, slen)
    call layout(c, .false., rc, rd, rlen)
    allocate (s(slen), r(rlen))
    s = 0
    call MPIX_Alltoallv_init(s, sc, sd, MPI_INTEGER, r, rc, rd, MPI_INTEGER, MPI_COMM_WORLD, MPI_INFO_NULL, q, ierr)
    do round = 0, 2
      r = -1
      call fill(c + round, s, sc, sd)
      call MPI_Start(q, ierr)
      call MPI_Wait(q, MPI_STATUS_IGNORE, ierr)
      write (name, '(a,i0)') 'f_persistent_', round
      call check(c + round, r, rc, rd, trim(name))
    end do
    call MPI_Request_free(q, ierr)
  end subroutine

end program
