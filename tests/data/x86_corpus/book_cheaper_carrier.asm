section .rodata
    north db "North", 0
    south db "South", 0
section .text
    push north
    call get_quote
    mov ebx, eax                  ; north's price
    push south
    call get_quote
    mov ecx, eax                  ; south's price
    mov esi, north
    mov edi, south
    cmp ebx, ecx
    jle .book
    xchg ebx, ecx                 ; cheaper one first
    xchg esi, edi
.book:
    push esi
    push ebx
    call book
    hlt
