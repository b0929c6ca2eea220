section .rodata
    items  dd bolts, nuts, screws
    bolts  db "bolts", 0
    nuts   db "nuts", 0
    screws db "screws", 0
section .bss
    low resd 3                    ; 1 where the item runs low
section .text
    xor esi, esi
    xor edi, edi                  ; how many run low
scan:
    push dword [items + esi*4]
    call get_stock
    cmp eax, 50
    setl bl
    movzx ebx, bl
    mov [low + esi*4], ebx
    add edi, ebx
    inc esi
    cmp esi, 3
    jl scan
    test edi, edi
    jz done
    push edi
    call notify_low
done:
    hlt
