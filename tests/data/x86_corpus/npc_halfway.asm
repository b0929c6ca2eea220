; Move the NPC half-way towards the target; remember the distance
section .rodata
    target_x dd 2
    target_y dd 8
section .bss
    distance resd 1
section .text
_start:
    call get_position
    pop esi                       ; x
    pop edi                       ; y
    mov eax, [target_x]
    sub eax, esi                  ; dx
    mov ebx, [target_y]
    sub ebx, edi                  ; dy
    mov ecx, eax
    test ecx, ecx
    jns .dx_ok
    neg ecx                       ; |dx|
.dx_ok:
    mov edx, ebx
    test edx, edx
    jns .dy_ok
    neg edx                       ; |dy|
.dy_ok:
    add ecx, edx
    mov [distance], ecx
    cmp ecx, 1
    jle .close
    sar eax, 1                    ; half the way
    sar ebx, 1
    add esi, eax
    add edi, ebx
    push esi
    push edi
    call move_to
.close:
    hlt
