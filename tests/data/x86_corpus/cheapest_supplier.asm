section .rodata
    suppliers dd acme, bolt, core, dyna
    acme db "Acme", 0
    bolt db "Bolt", 0
    core db "Core", 0
    dyna db "Dyna", 0
section .data
    confirmation dd 0
section .text
_start:
    mov ebx, 0x7fffffff           ; best price so far
    xor edi, edi                  ; best supplier
    xor esi, esi
.next:
    push dword [suppliers + esi*4]
    call get_price
    cmp eax, ebx
    cmovl ebx, eax
    cmovl edi, esi
    inc esi
    cmp esi, 4
    jb .next
    push dword [suppliers + edi*4]
    push ebx
    call place_order
    mov [confirmation], eax
    hlt
