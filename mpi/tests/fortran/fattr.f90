! Attributes, keyval callbacks and generalized requests from Fortran, through `mpif.h` (the
! F77 interface): MPICH's Fortran library calls MPII_Comm_set_attr/MPII_Comm_get_attr and
! friends, MPII_Keyval_set_proxy and MPII_Grequest_set_lang_f77 of the swapped library.
! Result lines "rank N: ..." are compared between viaduct and MPICH.
module fattr_cb
  implicit none
  include 'mpif.h'
  integer :: copies = 0, deletes = 0, frees = 0, queries = 0, cancels = 0
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

  ! Copies the value plus the extra state; counts the calls.
  subroutine copy_fn(oldcomm, keyval, extra, valin, valout, flag, ierr)
    integer :: oldcomm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: extra, valin, valout
    logical :: flag
    copies = copies + 1
    valout = valin + extra
    flag = .true.
    ierr = MPI_SUCCESS
  end subroutine copy_fn

  subroutine delete_fn(comm, keyval, val, extra, ierr)
    integer :: comm, keyval, ierr
    integer(kind=MPI_ADDRESS_KIND) :: val, extra
    deletes = deletes + 1
    ierr = MPI_SUCCESS
  end subroutine delete_fn

  subroutine query_fn(extra, status, ierr)
    integer(kind=MPI_ADDRESS_KIND) :: extra
    integer :: status(MPI_STATUS_SIZE), ierr
    queries = queries + 1
    call MPI_Status_set_elements(status, MPI_INTEGER, int(extra), ierr)
    call MPI_Status_set_cancelled(status, .false., ierr)
    status(MPI_SOURCE) = MPI_UNDEFINED
    status(MPI_TAG) = MPI_UNDEFINED
    ierr = MPI_SUCCESS
  end subroutine query_fn

  subroutine free_fn(extra, ierr)
    integer(kind=MPI_ADDRESS_KIND) :: extra
    integer :: ierr
    frees = frees + 1
    ierr = MPI_SUCCESS
  end subroutine free_fn

  subroutine cancel_fn(extra, complete, ierr)
    integer(kind=MPI_ADDRESS_KIND) :: extra
    logical :: complete
    integer :: ierr
    cancels = cancels + 1
    ierr = MPI_SUCCESS
  end subroutine cancel_fn
end module fattr_cb

program fattr
  use fattr_cb
  implicit none
  integer :: ierr, rank, size, keyval, tkeyval, dup, dup2, ival, win, req, count
  integer :: st(MPI_STATUS_SIZE), disp
  integer(kind=MPI_ADDRESS_KIND) :: val, extra, wsize, base
  logical :: flag
  integer :: buf(10)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, size, ierr)

  ! Predefined attributes come back as values in Fortran.
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, val, flag, ierr)
  call check(flag .and. val >= 32767, 'MPI_TAG_UB')
  call MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, ival, flag, ierr)
  call check(flag .and. int(val) == ival, 'MPI_TAG_UB by MPI_Attr_get')
  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, val, flag, ierr)
  write(*, '(A,I0,A,L1,A,L1)') 'rank ', rank, ': tag_ub found ', flag, ' wtime_is_global 0/1 ', &
       val == 0 .or. val == 1

  ! A keyval with Fortran callbacks: dup copies through copy_fn, free runs delete_fn.
  extra = 1000
  call MPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra, ierr)
  val = 42 + rank
  call MPI_Comm_set_attr(MPI_COMM_WORLD, keyval, val, ierr)
  val = 0
  call MPI_Comm_get_attr(MPI_COMM_WORLD, keyval, val, flag, ierr)
  call check(flag .and. val == 42 + rank, 'get own attribute')
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  call MPI_Comm_get_attr(dup, keyval, val, flag, ierr)
  write(*, '(A,I0,A,L1,A,I0,A,I0)') 'rank ', rank, ': dup attr ', flag, ' value ', val, &
       ' copies ', copies
  call MPI_Comm_dup(dup, dup2, ierr)
  call MPI_Comm_get_attr(dup2, keyval, val, flag, ierr)
  call check(flag .and. val == 2042 + rank, 'copied twice')
  ! Replacing runs delete_fn on the old value; freeing runs it on the attribute.
  val = 7
  call MPI_Comm_set_attr(dup2, keyval, val, ierr)
  call MPI_Comm_free(dup2, ierr)
  call MPI_Comm_delete_attr(dup, keyval, ierr)
  call MPI_Comm_get_attr(dup, keyval, val, flag, ierr)
  call check(.not. flag, 'deleted attribute')
  call MPI_Comm_free(dup, ierr)
  write(*, '(A,I0,A,I0,A,I0)') 'rank ', rank, ': copies ', copies, ' deletes ', deletes

  ! MPI-1 names with default INTEGER values, and the predefined copy functions.
  call MPI_Keyval_create(MPI_DUP_FN, MPI_NULL_DELETE_FN, ival, extra, ierr)
  call MPI_Attr_put(MPI_COMM_WORLD, ival, 314, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  count = 0
  call MPI_Attr_get(dup, ival, count, flag, ierr)
  write(*, '(A,I0,A,L1,A,I0)') 'rank ', rank, ': MPI_DUP_FN copied ', flag, ' value ', count
  call MPI_Comm_free(dup, ierr)
  call MPI_Attr_delete(MPI_COMM_WORLD, ival, ierr)
  call MPI_Keyval_free(ival, ierr)
  call check(ival == MPI_KEYVAL_INVALID, 'keyval freed')
  call MPI_Comm_delete_attr(MPI_COMM_WORLD, keyval, ierr)
  call MPI_Comm_free_keyval(keyval, ierr)

  ! Datatype attributes.
  call MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, MPI_TYPE_NULL_DELETE_FN, tkeyval, extra, ierr)
  val = -5
  call MPI_Type_set_attr(MPI_INTEGER, tkeyval, val, ierr)
  val = 0
  call MPI_Type_get_attr(MPI_INTEGER, tkeyval, val, flag, ierr)
  call check(flag .and. val == -5, 'type attribute')
  call MPI_Type_delete_attr(MPI_INTEGER, tkeyval, ierr)
  call MPI_Type_free_keyval(tkeyval, ierr)

  ! Window attributes come back as values: the base address, the size, the unit.
  wsize = 40
  disp = 4
  call MPI_Win_create(buf, wsize, disp, MPI_INFO_NULL, MPI_COMM_WORLD, win, ierr)
  call MPI_Win_get_attr(win, MPI_WIN_SIZE, val, flag, ierr)
  call check(flag .and. val == 40, 'MPI_WIN_SIZE')
  call MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, val, flag, ierr)
  call check(flag .and. val == 4, 'MPI_WIN_DISP_UNIT')
  call MPI_Win_get_attr(win, MPI_WIN_BASE, base, flag, ierr)
  call MPI_Get_address(buf, val, ierr)
  call check(flag .and. base == val, 'MPI_WIN_BASE')
  call MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, val, flag, ierr)
  write(*, '(A,I0,A,L1)') 'rank ', rank, ': flavor create ', val == MPI_WIN_FLAVOR_CREATE
  call MPI_Win_free(win, ierr)

  ! A generalized request with Fortran callbacks.
  extra = 6
  call MPI_Grequest_start(query_fn, free_fn, cancel_fn, extra, req, ierr)
  call MPI_Grequest_complete(req, ierr)
  call MPI_Wait(req, st, ierr)
  call MPI_Get_count(st, MPI_INTEGER, count, ierr)
  call check(req == MPI_REQUEST_NULL, 'grequest freed')
  call MPI_Grequest_start(query_fn, free_fn, cancel_fn, extra, req, ierr)
  call MPI_Cancel(req, ierr)
  call MPI_Grequest_complete(req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  write(*, '(A,I0,A,I0,A,I0,A,I0,A,I0)') 'rank ', rank, ': grequest count ', count, &
       ' queries ', queries, ' frees ', frees, ' cancels ', cancels

  call MPI_Finalize(ierr)
end program fattr
