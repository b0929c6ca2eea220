section .rodata
    threshold dd 10
section .text
    push "apples"
    call get_stock
    mov dword [threshold], 5
    cmp eax, [threshold]
