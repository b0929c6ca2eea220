; walk the patrol route, skipping the waypoint the NPC already stands on
section .rodata
    route_x dd 2, 8, 8, 2
    route_y dd 2, 2, 8, 8
section .data
    x     dd 0
    y     dd 0
    moves dd 0
section .text
_start:
    call get_position
    pop dword [x]
    pop dword [y]
    xor esi, esi
next_point:
    mov eax, [route_x + esi*4]
    mov ebx, [route_y + esi*4]
    cmp eax, [x]
    jne go
    cmp ebx, [y]
    je arrived
go:
    push eax
    push ebx
    call move_to
    mov [x], eax
    mov [y], ebx
    inc dword [moves]
arrived:
    inc esi
    cmp esi, 4
    jb next_point
    hlt
