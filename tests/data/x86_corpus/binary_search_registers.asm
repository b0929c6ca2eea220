section .bss
    answer resd 1
section .text
    mov ebx, 1                ; lo
    mov ecx, 1000             ; hi
.loop:
    cmp ebx, ecx
    jg .not_found
    lea edi, [ebx + ecx]
    sar edi, 1                ; mid
    push edi
    call guess
    cmp eax, 0
    je .found
    jl .higher                ; mid was too low
    lea ecx, [edi - 1]
    jmp .loop
.higher:
    lea ebx, [edi + 1]
    jmp .loop
.found:
    mov [answer], edi
    hlt
.not_found:
    mov dword [answer], -1
    hlt
