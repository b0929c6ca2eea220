; schedule cleaning on the days the shop is closed (bit 0 = Monday)
section .data
    open_mask dd 0
section .text
    xor esi, esi
.day:
    push esi
    call is_open
    test eax, eax
    jz .closed
    mov ecx, esi
    mov ebx, 1
    shl ebx, cl
    or dword [open_mask], ebx
.closed:
    inc esi
    cmp esi, 7
    jb .day
    mov eax, [open_mask]
    not eax
    and eax, 0x7F                 ; the seven days only
    push eax
    call set_schedule
