/* A Xen ELF note, for the head.S of our minimal guests. */
#define NOTE(type, desc_type, desc)           \
    .pushsection .note.Xen, "a", @note;       \
    .balign 4;                                \
    .long 2f - 1f;                            \
    .long 4f - 3f;                            \
    .long type;                               \
1:  .asciz "Xen";                             \
2:  .balign 4;                                \
3:  desc_type desc;                           \
4:  .balign 4;                                \
    .popsection
