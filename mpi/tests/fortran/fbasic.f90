! Point-to-point, collectives, datatypes, user operations and error codes from Fortran
! (`use mpi`, MPICH's Fortran library over the swapped libmpich.so.12). Each rank prints
! "rank N: ..." result lines that the tests compare between viaduct and MPICH; a failed
! check prints CHECK FAILED and aborts.
module fchecks
  use mpi
  implicit none
contains
  subroutine check(cond, what)
    logical, intent(in) :: cond
    character(len=*), intent(in) :: what
    integer :: ierr
    if (.not. cond) then
      write(0, '(A,A)') 'CHECK FAILED: ', what
      call MPI_Abort(MPI_COMM_WORLD, 3, ierr)
    end if
  end subroutine check

  subroutine maxabs(invec, inoutvec, len, datatype)
    integer, intent(in) :: len, datatype
    integer, intent(in) :: invec(len)
    integer, intent(inout) :: inoutvec(len)
    integer :: i
    do i = 1, len
      inoutvec(i) = max(abs(invec(i)), abs(inoutvec(i)))
    end do
  end subroutine maxabs
end module fchecks

program fbasic
  use mpi
  use fchecks
  implicit none
  integer :: ierr, rank, size, i, count, req(2), st(MPI_STATUS_SIZE)
  integer :: sts(MPI_STATUS_SIZE, 2), ibuf(8), ivals(4), isum, op, vec, sub, cart
  integer :: dims(2), coords(2), cls, slen, row(4, 3), col(3), errs
  integer :: ftype, ftype2, itype, ni, na, nd, comb, parms(2), notypes(1)
  integer(kind=MPI_ADDRESS_KIND) :: noaddrs(1)
  integer, allocatable :: all(:), counts(:), displs(:), gathered(:)
  logical :: periods(2), lval, land
  real :: r, rsum
  double precision :: d, dmax, t0
  complex :: c, csum
  character(len=MPI_MAX_ERROR_STRING) :: msg

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)
  t0 = MPI_Wtime()

  ! Ring exchange with a status, and with MPI_STATUS_IGNORE.
  ibuf = rank * 10 + [(i, i = 1, 8)]
  call MPI_Sendrecv_replace(ibuf, 8, MPI_INTEGER, mod(rank + 1, size), 5, &
       mod(rank + size - 1, size), 5, MPI_COMM_WORLD, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, count, ierr)
  call check(ierr == MPI_SUCCESS .and. count == 8, 'sendrecv_replace count')
  write(*, '(A,I0,A,I0,A,I0,A,I0,A,I0)') 'rank ', rank, ': ring from ', st(MPI_SOURCE), &
       ' tag ', st(MPI_TAG), ' count ', count, ' first ', ibuf(1)

  ! Nonblocking pair, MPI_STATUSES_IGNORE and then real statuses.
  call MPI_Irecv(ivals, 4, MPI_INTEGER, mod(rank + size - 1, size), 7, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(ibuf, 4, MPI_INTEGER, mod(rank + 1, size), 7, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Waitall(2, req, MPI_STATUSES_IGNORE, ierr)
  call check(req(1) == MPI_REQUEST_NULL .and. req(2) == MPI_REQUEST_NULL, 'waitall frees')
  call MPI_Irecv(ivals, 4, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(ibuf, 3, MPI_INTEGER, mod(rank + 1, size), 8, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Waitall(2, req, sts, ierr)
  call MPI_Get_count(sts(:, 1), MPI_INTEGER, count, ierr)
  write(*, '(A,I0,A,I0,A,I0,A,I0)') 'rank ', rank, ': waitall source ', sts(MPI_SOURCE, 1), &
       ' tag ', sts(MPI_TAG, 1), ' count ', count

  ! Reductions on the Fortran types.
  call MPI_Allreduce(rank + 1, isum, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  r = real(rank) + 0.5
  call MPI_Allreduce(r, rsum, 1, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
  d = dble(rank) * 1.25d0
  call MPI_Allreduce(d, dmax, 1, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  lval = rank >= 0
  call MPI_Allreduce(lval, land, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
  c = cmplx(real(rank), 1.0)
  call MPI_Allreduce(c, csum, 1, MPI_COMPLEX, MPI_SUM, MPI_COMM_WORLD, ierr)
  write(*, '(A,I0,A,I0,A,F8.2,A,F8.2,A,L1,A,F6.1,A,F6.1)') 'rank ', rank, ': sum ', isum, &
       ' rsum ', rsum, ' dmax ', dmax, ' land ', land, ' csum ', real(csum), ' ', aimag(csum)

  ! Parameterized types: one handle per (p, r), their envelope, a reduction on one.
  call MPI_Type_create_f90_real(6, 30, ftype, ierr)
  call MPI_Type_create_f90_real(6, 30, ftype2, ierr)
  call check(ftype == ftype2, 'same f90 type for the same (p, r)')
  call MPI_Type_create_f90_integer(9, itype, ierr)
  call MPI_Type_get_envelope(ftype, ni, na, nd, comb, ierr)
  call MPI_Type_get_contents(ftype, 2, 0, 0, parms, noaddrs, notypes, ierr)
  call MPI_Allreduce(r, rsum, 1, ftype, MPI_SUM, MPI_COMM_WORLD, ierr)
  write(*, '(A,I0,A,L1,A,3(1X,I0),A,L1,2(1X,I0),A,F8.2)') 'rank ', rank, ': f90 real combiner ', &
       comb == MPI_COMBINER_F90_REAL, ' counts', ni, na, nd, ' distinct ', itype /= ftype, &
       parms, ' sum ', rsum
  call MPI_Type_get_envelope(itype, ni, na, nd, comb, ierr)
  write(*, '(A,I0,A,L1,A,I0)') 'rank ', rank, ': f90 integer combiner ', &
       comb == MPI_COMBINER_F90_INTEGER, ' ints ', ni

  ! MPI_IN_PLACE and a program's operation.
  ivals = [(-(rank + 1) * i, i = 1, 4)]
  call MPI_Op_create(maxabs, .true., op, ierr)
  call MPI_Allreduce(MPI_IN_PLACE, ivals, 4, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
  call MPI_Op_free(op, ierr)
  call check(op == MPI_OP_NULL, 'op freed')
  write(*, '(A,I0,A,4(1X,I0))') 'rank ', rank, ': maxabs', ivals

  ! Gather variable counts into Fortran arrays.
  allocate(counts(size), displs(size), all(size), gathered(size * (size + 1) / 2))
  counts = [(i, i = 1, size)]
  displs(1) = 0
  do i = 2, size
    displs(i) = displs(i - 1) + counts(i - 1)
  end do
  ibuf = rank
  call MPI_Allgatherv(ibuf, rank + 1, MPI_INTEGER, gathered, counts, displs, MPI_INTEGER, &
       MPI_COMM_WORLD, ierr)
  call MPI_Allgather(rank * rank, 1, MPI_INTEGER, all, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  write(*, '(A,I0,A,10(1X,I0))') 'rank ', rank, ': allgatherv', gathered
  write(*, '(A,I0,A,4(1X,I0))') 'rank ', rank, ': allgather', all

  ! A row of a column-major array by a vector type.
  row = reshape([(i, i = 1, 12)], [4, 3])
  call MPI_Type_vector(3, 1, 4, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  if (rank == 0) then
    call MPI_Send(row(2, 1), 1, vec, size - 1, 9, MPI_COMM_WORLD, ierr)
  end if
  if (rank == size - 1) then
    call MPI_Recv(col, 3, MPI_INTEGER, 0, 9, MPI_COMM_WORLD, st, ierr)
    write(*, '(A,I0,A,3(1X,I0))') 'rank ', rank, ': row 2', col
  end if
  call MPI_Type_free(vec, ierr)

  ! Communicators and a Cartesian grid.
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, sub, ierr)
  call MPI_Comm_rank(sub, i, ierr)
  write(*, '(A,I0,A,I0)') 'rank ', rank, ': split rank ', i
  call MPI_Comm_free(sub, ierr)
  call check(sub == MPI_COMM_NULL, 'comm freed')
  dims = 0
  call MPI_Dims_create(size, 2, dims, ierr)
  periods = [.true., .false.]
  call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, .false., cart, ierr)
  call MPI_Cart_coords(cart, rank, 2, coords, ierr)
  write(*, '(A,I0,A,2(1X,I0),A,2(1X,I0))') 'rank ', rank, ': dims', dims, ' coords', coords
  call MPI_Comm_free(cart, ierr)

  ! An error returned under MPI_ERRORS_RETURN, with its class and text.
  call MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN, ierr)
  call MPI_Send(ibuf, 1, MPI_INTEGER, size + 3, 0, MPI_COMM_WORLD, ierr)
  call MPI_Error_class(ierr, cls, errs)
  call MPI_Error_string(ierr, msg, slen, errs)
  call check(slen > 0 .and. len_trim(msg) == slen, 'error string length')
  write(*, '(A,I0,A,L1)') 'rank ', rank, ': bad rank class is MPI_ERR_RANK ', cls == MPI_ERR_RANK

  call check(MPI_Wtime() >= t0, 'wtime')
  call MPI_Barrier(MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program fbasic
