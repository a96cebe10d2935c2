/* MPICH's MPIX_Delete_error_class/_code/_string: a string deleted leaves an empty one, a
   code and a class deleted are gone (deleting them again is an error of class
   MPI_ERR_OTHER, as is deleting a predefined class, code or string). */
#include "common.h"

static int class_of(int rc) {
    int c = -1;
    if (rc == MPI_SUCCESS) return 0;
    MPI_Error_class(rc, &c);
    return c;
}

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int cls, code;
    char s[MPI_MAX_ERROR_STRING];
    int len = -1;
    CHECK(MPI_Add_error_class(&cls) == MPI_SUCCESS);
    CHECK(MPI_Add_error_code(cls, &code) == MPI_SUCCESS);
    CHECK(MPI_Add_error_string(cls, "the class") == MPI_SUCCESS);
    CHECK(MPI_Add_error_string(code, "the code") == MPI_SUCCESS);
    CHECK(MPI_Error_string(code, s, &len) == MPI_SUCCESS);
    OK(rank, "code string before: \"%s\"", s);

    /* The string of the code goes; the class keeps its own. */
    OK(rank, "delete code string: %d", class_of(MPIX_Delete_error_string(code)));
    len = -1;
    CHECK(MPI_Error_string(code, s, &len) == MPI_SUCCESS);
    OK(rank, "code string after: \"%s\" (%d)", s, len);
    CHECK(MPI_Error_string(cls, s, &len) == MPI_SUCCESS);
    OK(rank, "class string kept: \"%s\"", s);
    int k = -1;
    CHECK(MPI_Error_class(code, &k) == MPI_SUCCESS);
    OK(rank, "code still in its class: %d", k == cls);

    /* A new string after the deletion. */
    CHECK(MPI_Add_error_string(code, "again") == MPI_SUCCESS);
    CHECK(MPI_Error_string(code, s, &len) == MPI_SUCCESS);
    OK(rank, "code string set again: \"%s\"", s);

    /* The code, then the class (their strings first: MPICH 4.0.2 frees the string of a
       deleted code or class again at MPI_Finalize otherwise). */
    CHECK(MPIX_Delete_error_string(code) == MPI_SUCCESS);
    CHECK(MPIX_Delete_error_string(cls) == MPI_SUCCESS);
    CHECK(MPI_Error_string(cls, s, &len) == MPI_SUCCESS);
    OK(rank, "class string deleted: \"%s\"", s);
    OK(rank, "delete code: %d", class_of(MPIX_Delete_error_code(code)));
    OK(rank, "delete code twice: %d", class_of(MPIX_Delete_error_code(code)));
    OK(rank, "delete class: %d", class_of(MPIX_Delete_error_class(cls)));
    OK(rank, "delete class twice: %d", class_of(MPIX_Delete_error_class(cls)));

    /* Predefined classes and codes are not the program's. */
    OK(rank, "delete predefined class: %d", class_of(MPIX_Delete_error_class(MPI_ERR_TAG)));
    OK(rank, "delete predefined string: %d", class_of(MPIX_Delete_error_string(MPI_ERR_TAG)));
    CHECK(MPI_Error_string(MPI_ERR_TAG, s, &len) == MPI_SUCCESS);
    OK(rank, "predefined string kept: %d", len > 0);

    /* Classes and codes added after the deletions work as before. */
    int cls2, code2;
    CHECK(MPI_Add_error_class(&cls2) == MPI_SUCCESS);
    CHECK(MPI_Add_error_code(cls2, &code2) == MPI_SUCCESS);
    CHECK(MPI_Error_class(code2, &k) == MPI_SUCCESS);
    OK(rank, "a new code in a new class: %d", k == cls2);
    OK(rank, "delete the new code: %d, class: %d", class_of(MPIX_Delete_error_code(code2)),
       class_of(MPIX_Delete_error_class(cls2)));
    MPI_Finalize();
    return 0;
}
